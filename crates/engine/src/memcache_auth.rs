//! memcached's authentication for shoal's memcached front end.
//!
//! memcached 1.6 with `-Y FILE` reads `user:password` lines and requires
//! every text-protocol connection to log in first with a `set` whose data is
//! `user password`. shoal does the same with `memcached-auth-file`, and, with
//! no such file, lets memcached clients log in as ACL users whenever the
//! default user needs a password (`requirepass`, `user default on >…`). The
//! binary protocol logs in with SASL PLAIN against the same list.
//!
//! A login's rights are those of the ACL user of the same name (with an
//! auth file: or of the default user when no ACL user has that name).

use crate::session::Session;
use crate::Engine;

/// The largest auth file read (memcached's are a few lines).
pub const AUTH_FILE_MAX: u64 = 1 << 20;

/// The most bytes of a user name or password in an auth file line.
pub const ENTRY_MAX: usize = 256;

/// The users of a memcached auth file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct AuthFile {
    entries: Vec<(Vec<u8>, Vec<u8>)>,
}

impl AuthFile {
    /// Reads an auth file's text: one `user:password` a line (the password
    /// is everything after the first `:`); blank lines are skipped, any
    /// other line without a `:` or with an empty name is an error.
    pub fn parse(text: &[u8]) -> Result<AuthFile, String> {
        let mut entries = Vec::new();
        for (n, line) in text.split(|b| *b == b'\n').enumerate() {
            let line = line.strip_suffix(b"\r").unwrap_or(line);
            if line.is_empty() {
                continue;
            }
            let Some(colon) = line.iter().position(|b| *b == b':') else {
                return Err(format!("line {}: not user:password", n + 1));
            };
            let (user, pass) = (&line[..colon], &line[colon + 1..]);
            if user.is_empty() || user.len() > ENTRY_MAX || pass.len() > ENTRY_MAX {
                return Err(format!(
                    "line {}: a name of 1 to {ENTRY_MAX} bytes and a password of at most {ENTRY_MAX}",
                    n + 1
                ));
            }
            entries.push((user.to_vec(), pass.to_vec()));
        }
        Ok(AuthFile { entries })
    }

    /// Reads the auth file at `path` (owner-only permissions are advised,
    /// not required: memcached does not check them either).
    pub fn load(path: &str) -> Result<AuthFile, String> {
        use std::io::Read;
        let file = std::fs::File::open(path).map_err(|e| format!("{path}: {e}"))?;
        let mut text = Vec::new();
        file.take(AUTH_FILE_MAX + 1)
            .read_to_end(&mut text)
            .map_err(|e| format!("{path}: {e}"))?;
        if text.len() as u64 > AUTH_FILE_MAX {
            return Err(format!("{path}: larger than {AUTH_FILE_MAX} bytes"));
        }
        AuthFile::parse(&text).map_err(|e| format!("{path}: {e}"))
    }

    /// Whether `user` and `pass` are one of the file's lines (every line
    /// is compared in full, so the time taken does not tell how much of a
    /// guess was right).
    pub fn check(&self, user: &[u8], pass: &[u8]) -> bool {
        self.entries.iter().fold(false, |found, (u, p)| {
            found | (same(u, user) & same(p, pass))
        })
    }
}

/// Compares without stopping at the first difference.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// The user and password of a text-protocol login token (a `set`'s data):
/// the first two words separated by spaces, as memcached reads them (a NUL
/// ends the token). None when there are not two.
pub fn text_token(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let data = data.split(|b| *b == 0).next().unwrap_or_default();
    let mut words = data.split(|b| *b == b' ').filter(|w| !w.is_empty());
    Some((words.next()?, words.next()?))
}

/// The user and password of a SASL PLAIN message: `authzid NUL authcid NUL
/// passwd` (RFC 4616); the authorization identity, if any, must be the
/// user's own.
pub fn plain_token(data: &[u8]) -> Option<(&[u8], &[u8])> {
    let mut parts = data.splitn(3, |b| *b == 0);
    let (authzid, user, pass) = (parts.next()?, parts.next()?, parts.next()?);
    if user.is_empty() || (!authzid.is_empty() && authzid != user) {
        return None;
    }
    Some((user, pass))
}

impl Engine {
    /// Whether memcached clients must log in: an auth file is set, or the
    /// default user needs a password.
    pub fn mc_auth_required(&self) -> bool {
        self.mc_auth_file.is_some() || self.auth_required()
    }

    /// Logs a memcached client in; true when it worked (the session is
    /// then the user's). With an auth file the file decides (and the ACL
    /// user of the same name, else the default user, gives the rights);
    /// otherwise the ACL users do, and a failure goes to ACL LOG.
    pub fn mc_login(&mut self, session: &mut Session, user: &[u8], pass: &[u8]) -> bool {
        if let Some(file) = &self.mc_auth_file {
            if !file.check(user, pass) {
                return false;
            }
            let name: &[u8] = if self.acl.users.get(user).is_some() {
                user
            } else {
                b"default"
            };
            let incarnation = self.acl.users.get(name).map_or(0, |u| u.incarnation);
            let name = name.to_vec();
            session.user = name;
            session.user_incarnation = incarnation;
            session.authenticated = Some(true);
            return true;
        }
        self.authenticate(session, user, pass, b"memcached")
    }

    /// Whether a logged-in session (or none, when no login is required)
    /// may go on: its user still exists and is on.
    pub fn mc_session_ok(&self, session: &Session) -> bool {
        if !self.mc_auth_required() {
            return true;
        }
        session.authenticated == Some(true)
            && self
                .acl
                .users
                .get(&session.user)
                .is_some_and(|u| u.is_enabled() && u.incarnation == session.user_incarnation)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auth_files_read_as_memcached_reads_them() {
        let f = AuthFile::parse(b"foo:bar\r\n\nalice:s3:cret\n").expect("valid");
        assert!(f.check(b"foo", b"bar"));
        assert!(f.check(b"alice", b"s3:cret"));
        assert!(!f.check(b"foo", b"ba"));
        assert!(!f.check(b"fo", b"bar"));
        assert!(!f.check(b"bar", b"foo"));
        assert!(AuthFile::parse(b"nocolon\n").is_err());
        assert!(AuthFile::parse(b":nouser\n").is_err());
        assert!(AuthFile::parse(&[b'a'; 300]).is_err());
    }

    #[test]
    fn tokens_split_as_memcached_splits_them() {
        assert_eq!(text_token(b"foo bar"), Some((&b"foo"[..], &b"bar"[..])));
        assert_eq!(text_token(b" foo  bar "), Some((&b"foo"[..], &b"bar"[..])));
        assert_eq!(text_token(b"foo bar\0x"), Some((&b"foo"[..], &b"bar"[..])));
        assert_eq!(text_token(b"foo bar baz"), Some((&b"foo"[..], &b"bar"[..])));
        assert_eq!(text_token(b"foobar"), None);
        assert_eq!(text_token(b"foo\0 bar"), None);
        assert_eq!(plain_token(b"\0foo\0bar"), Some((&b"foo"[..], &b"bar"[..])));
        assert_eq!(
            plain_token(b"foo\0foo\0b\0r"),
            Some((&b"foo"[..], &b"b\0r"[..]))
        );
        assert_eq!(plain_token(b"eve\0foo\0bar"), None);
        assert_eq!(plain_token(b"foo\0bar"), None);
        assert_eq!(plain_token(b"\0\0bar"), None);
    }
}
