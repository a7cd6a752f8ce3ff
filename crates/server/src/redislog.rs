//! Log lines in redis-server's format, `pid:role dd Mon yyyy hh:mm:ss.mmm
//! level text`, because tools written for Redis (its own test suite, CI
//! scripts) wait for lines such as ` PID: <pid>` and `Ready to accept
//! connections` on the server's stdout.

use std::time::{SystemTime, UNIX_EPOCH};

/// Redis's level marks: `.` debug, `-` verbose, `*` notice, `#` warning.
pub mod level {
    /// Notice.
    pub const NOTICE: char = '*';
    /// Warning.
    pub const WARNING: char = '#';
}

/// One line as redis-server prints it; `role` is `C` before the
/// configuration is loaded and `M` after (Redis's "master").
pub fn line(role: char, level: char, text: &str) -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let secs = now.as_secs();
    let (year, month, day) = civil_from_days((secs / 86_400) as i64);
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month_name = MONTHS.get(month as usize - 1).copied().unwrap_or("Jan");
    let tod = secs % 86_400;
    format!(
        "{}:{role} {day:02} {month_name} {year} {:02}:{:02}:{:02}.{:03} {level} {text}",
        std::process::id(),
        tod / 3600,
        tod / 60 % 60,
        tod % 60,
        now.subsec_millis(),
    )
}

/// Prints one line on stdout.
pub fn log(role: char, level: char, text: &str) {
    println!("{}", line(role, level, text));
}

/// The date (year, month 1-12, day 1-31) of a day count since 1970-01-01
/// (UTC), by Howard Hinnant's days-to-civil algorithm.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates_are_civil() {
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(19_782), (2024, 2, 29));
        assert_eq!(civil_from_days(-1), (1969, 12, 31));
    }

    #[test]
    fn lines_carry_the_pid() {
        let l = line('M', level::NOTICE, "Ready to accept connections");
        assert!(l.starts_with(&format!("{}:M ", std::process::id())));
        assert!(l.ends_with(" * Ready to accept connections"));
    }
}
