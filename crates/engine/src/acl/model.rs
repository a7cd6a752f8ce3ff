//! ACL users and selectors: applying rules (Redis 7.0's ACL SETUSER grammar),
//! describing them back (ACL LIST / GETUSER), checking a request.

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::sync::OnceLock;

use sha2::{Digest, Sha256};

use crate::command::{self, flags, Arg, Channels, Command};
use crate::keyspec;

use super::pattern::{KeyPatterns, Pattern};

/// Redis 7.0's categories, in ACL CAT's order.
pub(crate) const CATEGORIES: [&str; 21] = [
    "keyspace",
    "read",
    "write",
    "set",
    "sortedset",
    "list",
    "hash",
    "string",
    "bitmap",
    "hyperloglog",
    "geo",
    "stream",
    "pubsub",
    "admin",
    "fast",
    "slow",
    "blocking",
    "dangerous",
    "connection",
    "transaction",
    "scripting",
];

/// The category bit of `name` (case-insensitive), if it is one.
fn category_bit(name: &[u8]) -> Option<u32> {
    if name.eq_ignore_ascii_case(b"all") {
        return Some(u32::MAX);
    }
    CATEGORIES
        .iter()
        .position(|c| c.as_bytes().eq_ignore_ascii_case(name))
        .map(|i| 1 << i)
}

/// A command's categories as bits of [`CATEGORIES`], as Redis 7.0 files
/// them: those its flags imply (`@write`; `@read` unless it is a scripting
/// command; `@admin` + `@dangerous`; `@pubsub`; `@fast`, else `@slow`;
/// `@blocking`) and those Redis names for it (generated into
/// `key_specs.rs`). A command Redis does not have takes its group's.
fn categories_of(c: &Command) -> u32 {
    let bit = |name: &str| category_bit(name.as_bytes()).unwrap_or(0);
    let mut cats = match crate::key_specs::acl_categories(c.name) {
        Some(named) => named.iter().fold(0, |cats, n| cats | bit(n)),
        None => group_category(c.group, bit),
    };
    if c.flags & flags::WRITE != 0 {
        cats |= bit("write");
    }
    if c.flags & flags::READONLY != 0 && cats & bit("scripting") == 0 {
        cats |= bit("read");
    }
    if c.flags & flags::ADMIN != 0 {
        cats |= bit("admin") | bit("dangerous");
    }
    if c.flags & flags::PUBSUB != 0 {
        cats |= bit("pubsub");
    }
    if c.flags & flags::BLOCKING != 0 {
        cats |= bit("blocking");
    }
    cats | if c.flags & flags::FAST != 0 {
        bit("fast")
    } else {
        bit("slow")
    }
}

/// The category of a command group, for a command Redis does not have.
fn group_category(group: &str, bit: impl Fn(&str) -> u32) -> u32 {
    match group {
        "string" => bit("string"),
        "bitmap" => bit("bitmap"),
        "hyperloglog" => bit("hyperloglog"),
        "generic" => bit("keyspace"),
        "connection" => bit("connection"),
        "geo" => bit("geo"),
        "list" => bit("list"),
        "hash" => bit("hash"),
        "set" => bit("set"),
        "sorted-set" | "sorted_set" => bit("sortedset"),
        "pubsub" => bit("pubsub"),
        "scripting" => bit("scripting"),
        "stream" => bit("stream"),
        "transactions" => bit("transaction"),
        _ => 0,
    }
}

/// A command's categories as COMMAND INFO prints them (`@read`…).
pub(crate) fn category_names(c: &Command) -> Vec<String> {
    let cats = categories_of(c);
    CATEGORIES
        .iter()
        .enumerate()
        .filter(|(i, _)| cats & (1 << i) != 0)
        .map(|(_, n)| format!("@{n}"))
        .collect()
}

/// Every command and subcommand with an id (its bit in a selector).
pub(crate) struct Registry {
    /// By id: top-level commands, each followed by its subcommands.
    pub cmds: Vec<&'static Command>,
    /// By id: the parent's id of a subcommand.
    pub parent: Vec<Option<usize>>,
    /// By id: the ids of a container's subcommands.
    pub subs: Vec<Vec<usize>>,
    /// By id: category bits.
    pub cats: Vec<u32>,
    /// By id: the key specs.
    pub specs: Vec<&'static [keyspec::KeySpec]>,
    /// By id: how the check walks the keys of a request.
    plans: Vec<keyspec::KeyPlan>,
    /// Full name (`client|kill`) to id.
    by_name: HashMap<&'static str, usize>,
    /// A table entry's address to its id: the check of every request finds
    /// its command's bit without hashing the name.
    by_address: rustc_hash::FxHashMap<usize, usize>,
}

impl Registry {
    /// The id of `cmd` (a table entry).
    pub fn id_of(&self, cmd: &Command) -> Option<usize> {
        match self.by_address.get(&(cmd as *const Command as usize)) {
            Some(&id) => Some(id),
            // A copy of an entry made elsewhere: by its name.
            None => self.by_name.get(cmd.name).copied(),
        }
    }

    /// The id of a command named in a rule (case-insensitive, `a|b` for a
    /// subcommand).
    fn lookup(&self, name: &[u8]) -> Option<usize> {
        let lower = String::from_utf8_lossy(name).to_ascii_lowercase();
        self.by_name.get(lower.as_str()).copied()
    }

    fn words(&self) -> usize {
        self.cmds.len().div_ceil(64)
    }
}

/// The command registry, built once from the command table.
pub(crate) fn registry() -> &'static Registry {
    static REGISTRY: OnceLock<Registry> = OnceLock::new();
    REGISTRY.get_or_init(|| {
        let mut r = Registry {
            cmds: Vec::new(),
            parent: Vec::new(),
            subs: Vec::new(),
            cats: Vec::new(),
            by_name: HashMap::new(),
            by_address: Default::default(),
            specs: Vec::new(),
            plans: Vec::new(),
        };
        for c in command::all() {
            let id = r.cmds.len();
            r.cmds.push(c);
            r.parent.push(None);
            r.subs.push(Vec::new());
            r.cats.push(categories_of(c));
            r.by_name.insert(c.name, id);
            for s in c.subcommands {
                let sid = r.cmds.len();
                r.cmds.push(s);
                r.parent.push(Some(id));
                r.subs.push(Vec::new());
                r.cats.push(categories_of(s));
                r.by_name.insert(s.name, sid);
                r.subs[id].push(sid);
            }
        }
        r.by_address = r
            .cmds
            .iter()
            .map(|c| (*c as *const Command as usize, r.by_name[c.name]))
            .collect();
        r.specs = r.cmds.iter().map(|c| keyspec::specs(c)).collect();
        r.plans = r.specs.iter().map(|s| keyspec::plan(s)).collect();
        r
    })
}

/// Key pattern permissions.
const KEY_READ: u8 = 1;
const KEY_WRITE: u8 = 2;
const KEY_ALL: u8 = KEY_READ | KEY_WRITE;

/// What a rule did wrong (Redis's errno cases of ACLSetUser).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RuleError {
    Syntax,
    UnknownCommand,
    KeyAfterAll,
    ChannelAfterAll,
    NoSuchPassword,
    BadHash,
    FirstArgOfSubcommand,
}

impl RuleError {
    /// Redis's wording (ACLSetUserStringError).
    pub fn message(self) -> &'static str {
        match self {
            RuleError::Syntax => "Syntax error",
            RuleError::UnknownCommand => "Unknown command or category name in ACL",
            RuleError::KeyAfterAll => "Adding a pattern after the * pattern (or the 'allkeys' flag) is not valid and does not have any effect. Try 'resetkeys' to start with an empty list of patterns",
            RuleError::ChannelAfterAll => "Adding a pattern after the * pattern (or the 'allchannels' flag) is not valid and does not have any effect. Try 'resetchannels' to start with an empty list of channels",
            RuleError::NoSuchPassword => "The password you are trying to remove from the user does not exist",
            RuleError::BadHash => "The password hash must be exactly 64 characters and contain only lowercase hexadecimal characters",
            RuleError::FirstArgOfSubcommand => "Allowing first-arg of a subcommand is not supported",
        }
    }
}

/// Whether `s` has a space or NUL (Redis's ACLStringHasSpaces).
pub(crate) fn has_spaces(s: &[u8]) -> bool {
    s.iter()
        .any(|b| b.is_ascii_whitespace() || *b == 0 || *b == 0x0b)
}

/// One set of command, key and channel permissions. A user has a root
/// selector plus any number of `(…)` selectors; a request passes when one
/// selector allows all of it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Selector {
    allowed: Vec<u64>,
    /// Every command is allowed: set by `+@all`, cleared by removing any
    /// (the fast path of the check).
    all_commands: bool,
    /// `+@all` without `-@all` since: commands added later are allowed
    /// too (Redis's reserved command bit; it decides `+@all` or `-@all`
    /// at the head of the description).
    future: bool,
    /// `+cmd|arg` for a command without subcommands: the first arguments
    /// allowed while the command itself is not.
    first_args: BTreeMap<usize, Vec<Vec<u8>>>,
    all_keys: bool,
    keys: KeyPatterns,
    all_channels: bool,
    channels: Vec<Pattern>,
}

impl Selector {
    fn new(all_channels: bool) -> Selector {
        Selector {
            allowed: vec![0; registry().words()],
            all_commands: false,
            future: false,
            first_args: BTreeMap::new(),
            all_keys: false,
            keys: KeyPatterns::default(),
            all_channels,
            channels: Vec::new(),
        }
    }

    fn bit(&self, id: usize) -> bool {
        self.allowed[id / 64] & (1 << (id % 64)) != 0
    }

    fn set_bit(&mut self, id: usize, on: bool) {
        if on {
            self.allowed[id / 64] |= 1 << (id % 64);
        } else {
            self.allowed[id / 64] &= !(1 << (id % 64));
            self.all_commands = false;
        }
    }

    /// Redis's ACLChangeSelectorPerm: the command and its subcommands.
    fn change_perm(&mut self, id: usize, on: bool) {
        let r = registry();
        self.set_bit(id, on);
        self.first_args.remove(&id);
        for &s in &r.subs[id] {
            self.set_bit(s, on);
        }
    }

    fn change_category(&mut self, cat: u32, on: bool) {
        let r = registry();
        for id in 0..r.cmds.len() {
            if r.cats[id] & cat != 0 {
                self.change_perm(id, on);
            }
        }
    }

    fn set_all(&mut self, on: bool) {
        let fill = if on { u64::MAX } else { 0 };
        self.allowed.iter_mut().for_each(|w| *w = fill);
        self.all_commands = on;
        self.future = on;
        self.first_args.clear();
    }

    /// Applies one selector rule (Redis's ACLSetSelector).
    fn apply(&mut self, op: &[u8]) -> Result<(), RuleError> {
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        let r = registry();
        if is("allkeys") || op == b"~*" {
            self.all_keys = true;
            self.keys.clear();
        } else if is("resetkeys") {
            self.all_keys = false;
            self.keys.clear();
        } else if is("allchannels") || op == b"&*" {
            self.all_channels = true;
            self.channels.clear();
        } else if is("resetchannels") {
            self.all_channels = false;
            self.channels.clear();
        } else if is("allcommands") || is("+@all") {
            self.set_all(true);
        } else if is("nocommands") || is("-@all") {
            self.set_all(false);
        } else if op[0] == b'~' || op[0] == b'%' {
            if self.all_keys {
                return Err(RuleError::KeyAfterAll);
            }
            let mut perm = 0;
            let mut at = 1;
            if op[0] == b'%' {
                loop {
                    match op.get(at).map(u8::to_ascii_uppercase) {
                        Some(b'R') if perm & KEY_READ == 0 => perm |= KEY_READ,
                        Some(b'W') if perm & KEY_WRITE == 0 => perm |= KEY_WRITE,
                        Some(b'~') => {
                            at += 1;
                            break;
                        }
                        _ => return Err(RuleError::Syntax),
                    }
                    at += 1;
                }
            } else {
                perm = KEY_ALL;
            }
            let pattern = &op[at..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            self.keys.grant(pattern, perm);
            self.all_keys = false;
        } else if op[0] == b'&' {
            if self.all_channels {
                return Err(RuleError::ChannelAfterAll);
            }
            let pattern = &op[1..];
            if has_spaces(pattern) {
                return Err(RuleError::Syntax);
            }
            if !self.channels.iter().any(|c| **c == *pattern) {
                self.channels.push(Pattern::new(pattern));
            }
            self.all_channels = false;
        } else if op[0] == b'+' && op.get(1) != Some(&b'@') {
            let name = &op[1..];
            match name.iter().rposition(|&b| b == b'|') {
                None => {
                    let id = r.lookup(name).ok_or(RuleError::UnknownCommand)?;
                    self.change_perm(id, true);
                }
                Some(bar) => {
                    let id = r.lookup(&name[..bar]).ok_or(RuleError::UnknownCommand)?;
                    if r.parent[id].is_some() {
                        return Err(RuleError::FirstArgOfSubcommand);
                    }
                    let sub = &name[bar + 1..];
                    if sub.is_empty() {
                        return Err(RuleError::Syntax);
                    }
                    if !r.subs[id].is_empty() {
                        let sid = r.lookup(name).ok_or(RuleError::UnknownCommand)?;
                        self.change_perm(sid, true);
                    } else {
                        let list = self.first_args.entry(id).or_default();
                        if !list.iter().any(|a| a.eq_ignore_ascii_case(sub)) {
                            list.push(sub.to_vec());
                        }
                    }
                }
            }
        } else if op[0] == b'-' && op.get(1) != Some(&b'@') {
            let id = r.lookup(&op[1..]).ok_or(RuleError::UnknownCommand)?;
            self.change_perm(id, false);
        } else if (op[0] == b'+' || op[0] == b'-') && op.get(1) == Some(&b'@') {
            let cat = category_bit(&op[2..]).ok_or(RuleError::UnknownCommand)?;
            self.change_category(cat, op[0] == b'+');
        } else {
            return Err(RuleError::Syntax);
        }
        Ok(())
    }

    fn count_category(&self, cat: u32) -> (usize, usize) {
        let r = registry();
        let (mut on, mut off) = (0, 0);
        for id in 0..r.cmds.len() {
            if r.cats[id] & cat != 0 {
                if self.bit(id) {
                    on += 1;
                } else {
                    off += 1;
                }
            }
        }
        (on, off)
    }

    /// The command rules that rebuild this selector's bitmap, starting with
    /// `+@all` or `-@all` (Redis's ACLDescribeSelectorCommandRules: the
    /// best-fitting categories first, then single commands).
    pub fn describe_commands(&self) -> String {
        let r = registry();
        let mut rules = String::new();
        let additive = !self.future;
        let mut fake = Selector::new(false);
        if additive {
            rules.push_str("-@all ");
        } else {
            rules.push_str("+@all ");
            fake.set_all(true);
        }
        let mut temp = self.clone();
        let mut applied = [false; CATEGORIES.len()];
        loop {
            let mut best = None;
            let (mut min_diff, mut max_same) = (usize::MAX, 0);
            for (j, done) in applied.iter().enumerate() {
                if *done {
                    continue;
                }
                let (on, off) = temp.count_category(1 << j);
                let (diff, same) = if additive { (off, on) } else { (on, off) };
                if same > diff && (diff < min_diff || (diff == min_diff && same > max_same)) {
                    best = Some(j);
                    min_diff = diff;
                    max_same = same;
                }
            }
            let Some(j) = best else { break };
            fake.change_category(1 << j, additive);
            temp.change_category(1 << j, !additive);
            rules.push(if additive { '+' } else { '-' });
            rules.push('@');
            rules.push_str(CATEGORIES[j]);
            rules.push(' ');
            applied[j] = true;
        }
        for id in 0..r.cmds.len() {
            let user_bit = self.bit(id);
            if user_bit != fake.bit(id) {
                rules.push(if user_bit { '+' } else { '-' });
                rules.push_str(r.cmds[id].name);
                rules.push(' ');
                fake.change_perm(id, user_bit);
            }
            if !user_bit {
                if let Some(args) = self.first_args.get(&id) {
                    for a in args {
                        rules.push('+');
                        rules.push_str(r.cmds[id].name);
                        rules.push('|');
                        rules.push_str(&String::from_utf8_lossy(a));
                        rules.push(' ');
                    }
                }
            }
        }
        rules.pop();
        rules
    }

    /// The key patterns as ACL GETUSER shows them.
    pub fn describe_keys(&self) -> String {
        if self.all_keys {
            return "~*".into();
        }
        self.keys
            .iter()
            .map(|(p, perm)| pattern_string(p, *perm))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The channel patterns as ACL GETUSER shows them.
    pub fn describe_channels(&self) -> String {
        if self.all_channels {
            return "&*".into();
        }
        self.channels
            .iter()
            .map(|c| format!("&{}", String::from_utf8_lossy(c)))
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// The whole selector in rule form (Redis's ACLDescribeSelector).
    fn describe(&self) -> String {
        let mut out = String::new();
        if self.all_keys {
            out.push_str("~* ");
        } else {
            for (p, perm) in self.keys.iter() {
                out.push_str(&pattern_string(p, *perm));
                out.push(' ');
            }
        }
        if self.all_channels {
            out.push_str("&* ");
        } else {
            out.push_str("resetchannels ");
            for c in &self.channels {
                out.push('&');
                out.push_str(&String::from_utf8_lossy(c));
                out.push(' ');
            }
        }
        out.push_str(&self.describe_commands());
        out
    }

    /// Whether the selector allows the key under `perm`.
    fn key_ok(&self, key: &[u8], perm: u8) -> bool {
        self.all_keys || self.keys.allow(key, perm)
    }

    /// Whether the selector reaches every key with `perm` (Redis's
    /// ACLSelectorHasUnrestrictedKeyAccess): `allkeys`, or a `*` pattern.
    fn unrestricted_keys(&self, perm: u8) -> bool {
        self.all_keys
            || self
                .keys
                .iter()
                .any(|(p, have)| have & perm == perm && **p == *b"*")
    }

    fn channel_ok(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.all_channels
            || self.channels.iter().any(|p| {
                if is_pattern {
                    **p == *channel
                } else {
                    p.matches(channel)
                }
            })
    }

    /// Redis's ACLSelectorCheckCmd: Ok, or why not with the position of the
    /// offending argument.
    #[inline]
    fn check(
        &self,
        r: &Registry,
        id: usize,
        cmd: &Command,
        args: &[Arg<'_>],
    ) -> Result<(), (DeniedKind, usize)> {
        if !self.all_commands && cmd.flags & flags::NO_AUTH == 0 && !self.bit(id) {
            let arg_at = if r.parent[id].is_some() { 2 } else { 1 };
            let ok = self.first_args.get(&id).is_some_and(|list| {
                args.get(arg_at)
                    .is_some_and(|a| list.iter().any(|f| f.eq_ignore_ascii_case(a)))
            });
            if !ok {
                return Err((DeniedKind::Command, 0));
            }
        }
        if !self.all_keys && (cmd.first_key != 0 || cmd.movable_keys.is_some()) {
            // The plan walks the common shapes in place (keyspec::try_keys).
            let ok = |i: usize, spec_flags| self.key_ok(&args[i], key_permission(spec_flags));
            let denied = keyspec::try_keys(r.plans[id], cmd, r.specs[id], args, ok).err();
            if let Some(i) = denied {
                return Err((DeniedKind::Key, i));
            }
        }
        // Only the pub/sub commands name channels.
        if !self.all_channels && cmd.channels != Channels::None {
            let (from, pattern) = match cmd.channels {
                Channels::None => (args.len(), false),
                Channels::Publish => (1, false),
                Channels::Subscribe => (1, false),
                Channels::SubscribePattern => (1, true),
            };
            let to = if cmd.channels == Channels::Publish {
                2.min(args.len())
            } else {
                args.len()
            };
            for (i, channel) in args.iter().enumerate().take(to).skip(from) {
                if !self.channel_ok(channel, pattern) {
                    return Err((DeniedKind::Channel, i));
                }
            }
        }
        Ok(())
    }
}

/// The permission a key needs, from its key spec flags as Redis's
/// ACLSelectorCheckKey: reading when the command reads it (`access`),
/// writing when it inserts, deletes or updates it; none when neither (a
/// key only checked for existence, or whose length is read).
fn key_permission(spec_flags: u16) -> u8 {
    let mut perm = 0;
    if spec_flags & keyspec::flag::ACCESS != 0 {
        perm |= KEY_READ;
    }
    if spec_flags & (keyspec::flag::INSERT | keyspec::flag::DELETE | keyspec::flag::UPDATE) != 0 {
        perm |= KEY_WRITE;
    }
    perm
}

fn pattern_string(p: &[u8], perm: u8) -> String {
    let prefix = match perm {
        KEY_READ => "%R~",
        KEY_WRITE => "%W~",
        _ => "~",
    };
    format!("{prefix}{}", String::from_utf8_lossy(p))
}

/// Why a request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DeniedKind {
    /// The command (or subcommand).
    Command,
    /// One of its keys.
    Key,
    /// One of its channels.
    Channel,
}

/// A refused request: why, and the position of the key or channel.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Denied {
    /// What was refused.
    pub kind: DeniedKind,
    /// The argument position of the refused key or channel (0 for a
    /// command).
    pub arg: usize,
}

/// One ACL user.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// The name.
    pub name: Vec<u8>,
    /// Changes whenever the user is created anew (ACL LOAD, or SETUSER
    /// after DELUSER): clients authenticated as an older incarnation are
    /// closed.
    pub incarnation: u64,
    enabled: bool,
    nopass: bool,
    /// 0 = neither flag, 1 = skip-sanitize-payload, 2 = sanitize-payload.
    sanitize: u8,
    /// sha256 hex digests.
    passwords: Vec<String>,
    /// The root selector first.
    selectors: Vec<Selector>,
}

/// The sha256 of a password, in lower-case hex.
pub(crate) fn hash_password(password: &[u8]) -> String {
    let digest = Sha256::digest(password);
    digest.iter().map(|b| format!("{b:02x}")).collect()
}

fn valid_hash(h: &[u8]) -> bool {
    h.len() == 64 && h.iter().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

impl User {
    /// A new user: off, no passwords, no commands, no keys; channels as
    /// `acl-pubsub-default` says.
    pub(crate) fn new(name: &[u8], all_channels: bool) -> User {
        User {
            name: name.to_vec(),
            incarnation: 0,
            enabled: false,
            nopass: false,
            sanitize: 0,
            passwords: Vec::new(),
            selectors: vec![Selector::new(all_channels)],
        }
    }

    /// Redis's default user: on, nopass, every command, key and channel.
    pub(crate) fn default_user() -> User {
        let mut u = User::new(b"default", true);
        for op in ["+@all", "~*", "&*", "on", "nopass"] {
            u.apply(op.as_bytes(), true).expect("valid rule");
        }
        u
    }

    /// Whether the user is on.
    pub(crate) fn is_enabled(&self) -> bool {
        self.enabled
    }

    /// Whether the user may run anything without a password.
    pub(crate) fn is_open(&self) -> bool {
        let root = &self.selectors[0];
        self.enabled
            && self.nopass
            && root.all_commands
            && root.first_args.is_empty()
            && root.all_keys
            && root.all_channels
    }

    /// Whether any password logs in (`nopass`).
    pub(crate) fn is_nopass(&self) -> bool {
        self.nopass
    }

    /// Whether a connection must authenticate before running commands as
    /// this user (Redis's authRequired for the default user).
    pub(crate) fn requires_auth(&self) -> bool {
        !self.nopass || !self.enabled
    }

    /// Whether `password` logs in as this user.
    pub(crate) fn password_ok(&self, password: &[u8]) -> bool {
        if !self.enabled {
            return false;
        }
        if self.nopass {
            return true;
        }
        let hashed = hash_password(password);
        // Every stored hash is compared, so the time taken does not say
        // which one matched.
        self.passwords.iter().fold(false, |ok, p| {
            ok | constant_time_eq(p.as_bytes(), hashed.as_bytes())
        })
    }

    /// Applies one rule (Redis's ACLSetUser); `all_channels` is
    /// `acl-pubsub-default`, which `reset` uses.
    pub(crate) fn apply(&mut self, op: &[u8], all_channels: bool) -> Result<(), RuleError> {
        if op.is_empty() {
            return Ok(());
        }
        let is = |w: &str| op.eq_ignore_ascii_case(w.as_bytes());
        if is("on") {
            self.enabled = true;
        } else if is("off") {
            self.enabled = false;
        } else if is("skip-sanitize-payload") {
            self.sanitize = 1;
        } else if is("sanitize-payload") {
            self.sanitize = 2;
        } else if is("nopass") {
            self.nopass = true;
            self.passwords.clear();
        } else if is("resetpass") {
            self.nopass = false;
            self.passwords.clear();
        } else if op[0] == b'>' || op[0] == b'#' {
            let hash = if op[0] == b'>' {
                hash_password(&op[1..])
            } else {
                if !valid_hash(&op[1..]) {
                    return Err(RuleError::BadHash);
                }
                String::from_utf8_lossy(&op[1..]).into_owned()
            };
            if !self.passwords.contains(&hash) {
                self.passwords.push(hash);
            }
            self.nopass = false;
        } else if op[0] == b'<' || op[0] == b'!' {
            let hash = if op[0] == b'<' {
                hash_password(&op[1..])
            } else {
                if !valid_hash(&op[1..]) {
                    return Err(RuleError::BadHash);
                }
                String::from_utf8_lossy(&op[1..]).into_owned()
            };
            let at = self
                .passwords
                .iter()
                .position(|p| *p == hash)
                .ok_or(RuleError::NoSuchPassword)?;
            self.passwords.remove(at);
        } else if op[0] == b'(' && op[op.len() - 1] == b')' {
            let inner = &op[1..op.len() - 1];
            let words = crate::config::startup::split_args(inner).ok_or(RuleError::Syntax)?;
            let mut s = Selector::new(false);
            for w in words.iter().filter(|w| !w.is_empty()) {
                s.apply(w)?;
            }
            self.selectors.push(s);
        } else if is("clearselectors") {
            self.selectors.truncate(1);
        } else if is("reset") {
            self.nopass = false;
            self.passwords.clear();
            let root = &mut self.selectors[0];
            root.all_keys = false;
            root.keys.clear();
            root.all_channels = all_channels;
            root.channels.clear();
            self.enabled = false;
            self.sanitize = 2;
            self.selectors.truncate(1);
            self.selectors[0].set_all(false);
        } else {
            self.selectors[0].apply(op)?;
        }
        Ok(())
    }

    /// The flags, in Redis's order.
    pub(crate) fn flag_names(&self) -> Vec<&'static str> {
        let mut f = Vec::new();
        f.push(if self.enabled { "on" } else { "off" });
        if self.nopass {
            f.push("nopass");
        }
        match self.sanitize {
            1 => f.push("skip-sanitize-payload"),
            2 => f.push("sanitize-payload"),
            _ => {}
        }
        f
    }

    /// The password hashes.
    pub(crate) fn passwords(&self) -> &[String] {
        &self.passwords
    }

    /// The selectors, root first.
    pub(crate) fn selectors(&self) -> &[Selector] {
        &self.selectors
    }

    /// The rules that rebuild this user (ACL LIST's text after the name).
    pub fn describe(&self) -> String {
        let mut out = String::new();
        for f in self.flag_names() {
            out.push_str(f);
            out.push(' ');
        }
        for p in &self.passwords {
            out.push('#');
            out.push_str(p);
            out.push(' ');
        }
        out.push_str(&self.selectors[0].describe());
        for s in &self.selectors[1..] {
            out.push_str(" (");
            out.push_str(&s.describe());
            out.push(')');
        }
        out
    }

    /// The `user` line of ACL LIST and the ACL file.
    pub fn line(&self) -> String {
        format!(
            "user {} {}",
            String::from_utf8_lossy(&self.name),
            self.describe()
        )
    }

    /// Whether the user may run `args` (Redis's ACLCheckAllUserCommandPerm):
    /// one selector must allow all of it; else the most relevant refusal.
    pub fn check(&self, cmd: &Command, args: &[Arg<'_>]) -> Result<(), Denied> {
        self.check_as(registry().id_of(cmd), cmd, args)
    }

    /// [`check`](Self::check) of a command whose registry id the caller
    /// already knows.
    pub(crate) fn check_as(
        &self,
        id: Option<usize>,
        cmd: &Command,
        args: &[Arg<'_>],
    ) -> Result<(), Denied> {
        let r = registry();
        let Some(id) = id else {
            return Ok(());
        };
        let mut worst = Denied {
            kind: DeniedKind::Command,
            arg: 0,
        };
        for s in &self.selectors {
            match s.check(r, id, cmd, args) {
                Ok(()) => return Ok(()),
                Err((kind, arg)) => {
                    let rank = |k: DeniedKind| k as u8;
                    if rank(kind) > rank(worst.kind) || (kind == worst.kind && arg > worst.arg) {
                        worst = Denied { kind, arg };
                    }
                }
            }
        }
        Err(worst)
    }

    /// Whether one selector both allows `args` and reads every key (SORT's
    /// BY and GET patterns read keys no key spec names).
    pub(crate) fn reads_every_key(&self, cmd: &Command, args: &[Arg<'_>]) -> bool {
        let r = registry();
        let Some(id) = r.id_of(cmd) else {
            return true;
        };
        self.selectors
            .iter()
            .any(|s| s.check(r, id, cmd, args).is_ok() && s.unrestricted_keys(KEY_READ))
    }

    /// Whether any selector grants every channel.
    pub(crate) fn all_channels(&self) -> bool {
        self.selectors.iter().any(|s| s.all_channels)
    }

    /// Every channel pattern of every selector.
    pub(crate) fn channel_patterns(&self) -> Vec<Vec<u8>> {
        self.selectors
            .iter()
            .flat_map(|s| s.channels.iter().map(|p| p.to_vec()))
            .collect()
    }

    /// Whether the user may publish or subscribe to `channel`.
    pub(crate) fn channel_allowed(&self, channel: &[u8], is_pattern: bool) -> bool {
        self.selectors
            .iter()
            .any(|s| s.channel_ok(channel, is_pattern))
    }
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Applies `rules` (ACL SETUSER's arguments after the name, or a `user`
/// line's) to `user` as Redis does: selectors spread over several
/// arguments are joined first; all or nothing. The error is Redis's reply
/// text (without `ERR `).
pub fn check_rules(user: &mut User, rules: &[&[u8]], all_channels: bool) -> Result<(), String> {
    let merged = merge_selectors(rules)?;
    let mut staged = user.clone();
    for op in &merged {
        staged.apply(op, all_channels).map_err(|e| {
            format!(
                "Error in ACL SETUSER modifier '{}': {}",
                String::from_utf8_lossy(op),
                e.message()
            )
        })?;
    }
    *user = staged;
    Ok(())
}

/// Joins a selector written over several arguments (`(+get` `~k)`) into
/// one, as Redis's ACLMergeSelectorArguments does.
fn merge_selectors(rules: &[&[u8]]) -> Result<Vec<Vec<u8>>, String> {
    let mut out = Vec::new();
    let mut open: Option<(Vec<u8>, usize)> = None;
    for (i, op) in rules.iter().enumerate() {
        if let Some((sel, _)) = open.as_mut() {
            sel.push(b' ');
            sel.extend_from_slice(op);
            if op.last() == Some(&b')') {
                out.push(open.take().expect("open").0);
            }
            continue;
        }
        if op.first() == Some(&b'(') && op.last() != Some(&b')') {
            open = Some((op.to_vec(), i));
            continue;
        }
        out.push(op.to_vec());
    }
    if let Some((_, i)) = open {
        return Err(format!(
            "Unmatched parenthesis in acl selector starting at '{}'.",
            String::from_utf8_lossy(rules[i])
        ));
    }
    Ok(out)
}

/// Every user, by name (ACL LIST's order: bytewise). Shared, so that a
/// connection keeps its user at hand without a lookup by name per request.
#[derive(Clone, Debug)]
pub(crate) struct Users {
    pub map: BTreeMap<Vec<u8>, Arc<User>>,
}

impl Users {
    /// Only Redis's default user.
    pub fn with_default() -> Users {
        let mut map = BTreeMap::new();
        map.insert(b"default".to_vec(), Arc::new(User::default_user()));
        Users { map }
    }

    pub fn get(&self, name: &[u8]) -> Option<&User> {
        self.map.get(name).map(|u| &**u)
    }

    /// The user named `name`, shared.
    pub fn get_shared(&self, name: &[u8]) -> Option<&Arc<User>> {
        self.map.get(name)
    }

    pub fn default_user(&self) -> &User {
        self.map
            .get(&b"default"[..])
            .expect("the default user always exists")
    }

    /// The next unused incarnation number.
    pub fn next_incarnation(&self) -> u64 {
        self.map.values().map(|u| u.incarnation).max().unwrap_or(0) + 1
    }

    /// The users from the segment's text: `<incarnation> user <name>
    /// <rules>` lines. A line that does not parse (the bytes are untrusted)
    /// is skipped; the default user is always there.
    pub fn from_segment_text(text: &[u8]) -> Users {
        let mut users = Users::with_default();
        for line in text.split(|&b| b == b'\n') {
            let words: Vec<&[u8]> = line
                .split(|&b| b == b' ')
                .filter(|w| !w.is_empty())
                .collect();
            let [inc, kw, name, rules @ ..] = &words[..] else {
                continue;
            };
            if *kw != b"user" {
                continue;
            }
            let Some(inc) = std::str::from_utf8(inc).ok().and_then(|s| s.parse().ok()) else {
                continue;
            };
            let mut u = User::new(name, false);
            if check_rules(&mut u, rules, false).is_ok() {
                u.incarnation = inc;
                users.map.insert(name.to_vec(), Arc::new(u));
            }
        }
        users
    }

    /// The text the segment keeps.
    pub fn to_segment_text(&self) -> Vec<u8> {
        let mut out = String::new();
        for u in self.map.values() {
            out.push_str(&format!("{} {}\n", u.incarnation, u.line()));
        }
        out.into_bytes()
    }

    /// Parses ACL file text (or `user` directives): each non-empty,
    /// non-comment line `user <name> <rules>`. A duplicate user or a bad
    /// rule is an error naming the line, as Redis's ACLLoadFromFile says.
    pub fn from_acl_file(text: &[u8], all_channels: bool) -> Result<Users, String> {
        let mut users = Users {
            map: BTreeMap::new(),
        };
        let mut errors = String::new();
        for (i, raw) in text.split(|&b| b == b'\n').enumerate() {
            let line = raw.trim_ascii();
            if line.is_empty() || line[0] == b'#' {
                continue;
            }
            let linenum = i + 1;
            let Some(words) = crate::config::startup::split_args(line) else {
                errors.push_str(&format!("{linenum}: unbalanced quotes in acl line. "));
                continue;
            };
            if words.first().map(|w| w.as_slice()) != Some(b"user") || words.len() < 2 {
                errors.push_str(&format!("{linenum}: line should start with user keyword. "));
                continue;
            }
            let name = &words[1];
            if has_spaces(name) {
                errors.push_str(&format!(
                    "{linenum}: username '{}' contains invalid characters. ",
                    String::from_utf8_lossy(name)
                ));
                continue;
            }
            if users.map.contains_key(name) {
                errors.push_str(&format!(
                    "WARNING: Duplicate user '{}' found on line {linenum}. ",
                    String::from_utf8_lossy(name)
                ));
                continue;
            }
            let rules: Vec<&[u8]> = words[2..].iter().map(|w| w.as_slice()).collect();
            let mut u = User::new(name, all_channels);
            if let Err(e) = check_rules(&mut u, &rules, all_channels) {
                errors.push_str(&format!("{linenum}: {e}. "));
                continue;
            }
            users.map.insert(name.to_vec(), Arc::new(u));
        }
        if !errors.is_empty() {
            return Err(errors.trim_end().to_string());
        }
        if !users.map.contains_key(&b"default"[..]) {
            users
                .map
                .insert(b"default".to_vec(), Arc::new(User::default_user()));
        }
        Ok(users)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(rules: &str) -> User {
        let mut u = User::new(b"u", false);
        let words: Vec<&[u8]> = rules.split(' ').map(str::as_bytes).collect();
        check_rules(&mut u, &words, false).expect("valid");
        u
    }

    #[test]
    fn default_user_describes_as_redis_does() {
        assert_eq!(
            User::default_user().line(),
            "user default on nopass ~* &* +@all"
        );
    }

    #[test]
    fn describe_uses_categories_then_commands() {
        assert_eq!(
            user("+@all -@string").describe_commands_root(),
            "+@all -@string"
        );
        assert_eq!(user("-@all +@set").describe_commands_root(), "-@all +@set");
        assert_eq!(
            user("+@all -client|kill").describe_commands_root(),
            "+@all -client|kill"
        );
        assert_eq!(
            user("+memory|doctor").describe_commands_root(),
            "-@all +memory|doctor"
        );
        assert_eq!(
            user("+select|0").describe_commands_root(),
            "-@all +select|0"
        );
    }

    #[test]
    fn every_category_round_trips() {
        for (i, c) in CATEGORIES.iter().enumerate() {
            // A category no command has yet (streams) cannot show.
            if !registry().cats.iter().any(|cats| cats & (1 << i) != 0) {
                continue;
            }
            let u = user(&format!("+@all -@{c}"));
            assert_eq!(u.describe_commands_root(), format!("+@all -@{c}"));
            let u = user(&format!("-@all +@{c}"));
            assert_eq!(u.describe_commands_root(), format!("-@all +@{c}"));
        }
    }

    #[test]
    fn description_parses_back_to_the_same_user() {
        let u = user("on >p1 ~a* %R~b* %W~c* &ch +@all -@string +get (+set ~x*) (-@all +ping)");
        let text = Users {
            map: [(b"u".to_vec(), Arc::new(u.clone()))].into_iter().collect(),
        }
        .to_segment_text();
        let back = Users::from_segment_text(&text);
        assert_eq!(back.get(b"u"), Some(&u));
    }

    #[test]
    fn bad_rules_are_refused_whole() {
        let mut u = User::new(b"u", false);
        let err = check_rules(&mut u, &[b"on", b"+nosuchcmd"], false).unwrap_err();
        assert!(
            err.contains("Unknown command or category name in ACL"),
            "{err}"
        );
        assert!(!u.enabled);
        let err = check_rules(&mut u, &[b"#abc"], false).unwrap_err();
        assert!(err.contains("64 characters"), "{err}");
        let err = check_rules(&mut u, &[b"(+get", b"~x"], false).unwrap_err();
        assert!(err.starts_with("Unmatched parenthesis"), "{err}");
        let err = check_rules(&mut u, &[b"~*", b"~a"], false).unwrap_err();
        assert!(err.contains("'allkeys'"), "{err}");
        let err = check_rules(&mut u, &[b"+config|get|x"], false).unwrap_err();
        assert!(err.contains("first-arg"), "{err}");
    }

    #[test]
    fn passwords_are_checked_by_hash() {
        let u = user("on >secret");
        assert!(u.password_ok(b"secret"));
        assert!(!u.password_ok(b"other"));
        assert!(u.passwords()[0].len() == 64);
    }

    impl User {
        fn describe_commands_root(&self) -> String {
            self.selectors[0].describe_commands()
        }
    }
}
