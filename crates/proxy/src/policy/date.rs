//! HTTP-dates as a recipient reads them (RFC 9110 §5.6.7).
//!
//! A recipient must accept all three forms: IMF-fixdate (`Sun, 06 Nov 1994 08:49:37 GMT`)
//! and the obsolete RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and asctime
//! (`Sun Nov  6 08:49:37 1994`) forms. `httpdate` parses the three, but only with names in
//! their exact case, only with a day name that matches the date, and with the RFC 850
//! two-digit year fixed to 1970–2069, where §5.6.7 requires "more than 50 years in the
//! future" to mean the century before. So the forms are read here: names of days, months
//! and `GMT` case-insensitively (as nginx and Varnish read them), the day name checked to
//! be one but not against the date (it is redundant), a day of one digit as of two.
//!
//! The layout itself is not relaxed: the comma after the day name that IMF-fixdate and
//! RFC 850 require (and asctime forbids) must be there, and fields are separated by one
//! space, the only two being asctime's before a one-digit day (`Nov  6`). A date without
//! its comma or with a run of spaces is not one of the three forms, so it is invalid (an
//! `Expires` with it: already expired, RFC 9111 §5.3).

use std::time::{Duration, SystemTime};

/// Month names, in order.
const MONTHS: [&str; 12] = [
    "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec",
];

/// Day names, short and long (`day-name` and RFC 850's `day-name-l`).
const DAYS: [&str; 14] = [
    "mon",
    "tue",
    "wed",
    "thu",
    "fri",
    "sat",
    "sun",
    "monday",
    "tuesday",
    "wednesday",
    "thursday",
    "friday",
    "saturday",
    "sunday",
];

/// The moment `text` names in any of the three forms, if it is a valid date; `now` places
/// an RFC 850 two-digit year.
pub(crate) fn parse(text: &str, now: SystemTime) -> Option<SystemTime> {
    // Only the field's surrounding whitespace (OWS, not part of the value) is dropped.
    let text = text.trim_matches([' ', '\t']);
    let (year, month, day, seconds) = imf_fixdate(text.as_bytes()).or_else(|| fields(text, now))?;
    let days = days_from_epoch(year, month, day);
    let offset = Duration::from_secs(days.unsigned_abs() * 86_400);
    let midnight = if days >= 0 {
        SystemTime::UNIX_EPOCH.checked_add(offset)?
    } else {
        SystemTime::UNIX_EPOCH.checked_sub(offset)?
    };
    midnight.checked_add(Duration::from_secs(seconds))
}

/// A valid date's year, month (0-based), day and second of the day.
type Fields = (u64, usize, u64, u64);

/// The fields of `text` when it is an IMF-fixdate laid out exactly (29 bytes,
/// `Sun, 06 Nov 1994 08:49:37 GMT`, names in any case) and valid; `None` otherwise, for
/// [`fields`] to read. Every response's `Date` is read, several times, and nearly all
/// are this form: read by position, it costs a tenth of splitting it into fields.
fn imf_fixdate(text: &[u8]) -> Option<Fields> {
    let [d0, d1, d2, b',', b' ', day @ .., b' ', g, m, t] = text else {
        return None;
    };
    let [
        day0,
        day1,
        b' ',
        m0,
        m1,
        m2,
        b' ',
        y0,
        y1,
        y2,
        y3,
        b' ',
        time @ ..,
    ] = day
    else {
        return None;
    };
    let [h0, h1, b':', n0, n1, b':', s0, s1] = time else {
        return None;
    };
    // Or-ing 0x20 lower-cases an ASCII letter and maps nothing else onto one: compared
    // with lower-case names, it is a case-insensitive comparison.
    let lower = |a: u8, b: u8, c: u8| [a | 0x20, b | 0x20, c | 0x20];
    let day_name = lower(*d0, *d1, *d2);
    let is_day = matches!(
        &day_name,
        b"mon" | b"tue" | b"wed" | b"thu" | b"fri" | b"sat" | b"sun"
    );
    if !is_day || lower(*g, *m, *t) != *b"gmt" {
        return None;
    }
    let month = match &lower(*m0, *m1, *m2) {
        b"jan" => 0,
        b"feb" => 1,
        b"mar" => 2,
        b"apr" => 3,
        b"may" => 4,
        b"jun" => 5,
        b"jul" => 6,
        b"aug" => 7,
        b"sep" => 8,
        b"oct" => 9,
        b"nov" => 10,
        b"dec" => 11,
        _ => return None,
    };
    let digits = |ds: &[u8]| {
        ds.iter().try_fold(0u64, |n, &b| {
            b.is_ascii_digit().then(|| n * 10 + u64::from(b - b'0'))
        })
    };
    let year = digits(&[*y0, *y1, *y2, *y3])?;
    let day = digits(&[*day0, *day1]).filter(|d| *d >= 1 && *d <= days_in_month(year, month))?;
    let hours = digits(&[*h0, *h1]).filter(|h| *h < 24)?;
    let minutes = digits(&[*n0, *n1]).filter(|m| *m < 60)?;
    let seconds = digits(&[*s0, *s1]).filter(|s| *s < 60)?;
    Some((year, month, day, hours * 3600 + minutes * 60 + seconds))
}

/// The fields of `text` in any of the three forms, if it is a valid date; `now` places an
/// RFC 850 two-digit year.
fn fields(text: &str, now: SystemTime) -> Option<Fields> {
    let (day_name, rest) = text.split_once(' ')?;
    // The comma tells the forms apart: IMF-fixdate and RFC 850 have it, asctime has not.
    let (day_name, comma) = match day_name.strip_suffix(',') {
        Some(name) => (name, true),
        None => (day_name, false),
    };
    if !DAYS.iter().any(|d| d.eq_ignore_ascii_case(day_name)) {
        return None;
    }
    // Split on each single space: a run of spaces leaves an empty field, which no form has.
    // Into an array, not a `Vec`: no form has more than five fields.
    let mut fields = [""; 5];
    let mut count = 0;
    for field in rest.split(' ') {
        *fields.get_mut(count)? = field;
        count += 1;
    }
    let (year, month, day, time) = match (comma, &fields[..count]) {
        // IMF-fixdate: day month year time GMT.
        (true, [day, month, year, time, gmt]) if year.len() == 4 && is_gmt(gmt) => {
            (number(year)?, *month, *day, *time)
        }
        // RFC 850: day-month-yy time GMT.
        (true, [date, time, gmt]) if is_gmt(gmt) => {
            let mut parts = date.split('-');
            let (day, month, yy) = (parts.next()?, parts.next()?, parts.next()?);
            if parts.next().is_some() || yy.len() != 2 {
                return None;
            }
            (two_digit_year(number(yy)?, now), month, day, *time)
        }
        // asctime with a one-digit day after two spaces: month SP SP day time year.
        (false, [month, "", day, time, year]) if day.len() == 1 && year.len() == 4 => {
            (number(year)?, *month, *day, *time)
        }
        // asctime: month day time year.
        (false, [month, day, time, year]) if year.len() == 4 => {
            (number(year)?, *month, *day, *time)
        }
        _ => return None,
    };
    let month = MONTHS.iter().position(|m| m.eq_ignore_ascii_case(month))?;
    let day = number(day).filter(|d| day.len() <= 2 && *d >= 1)?;
    if day > days_in_month(year, month) {
        return None;
    }
    let mut clock = time.split(':');
    let mut field = |limit: u64| {
        let part = clock.next()?;
        number(part).filter(|v| part.len() == 2 && *v < limit)
    };
    let seconds = field(24)? * 3600 + field(60)? * 60 + field(60)?;
    if clock.next().is_some() {
        return None;
    }
    Some((year, month, day, seconds))
}

/// `GMT`, in any case.
fn is_gmt(token: &str) -> bool {
    token.eq_ignore_ascii_case("gmt")
}

/// A run of ASCII digits (no sign), at most four.
fn number(text: &str) -> Option<u64> {
    if text.is_empty() || text.len() > 4 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    text.parse().ok()
}

/// The year an RFC 850 `yy` names at `now`: the one in `now`'s century, unless that is more
/// than 50 years ahead (then the century before) or 50 or more behind (then the one after).
fn two_digit_year(yy: u64, now: SystemTime) -> u64 {
    // The current year, from the IMF-fixdate httpdate formats (`Sun, 06 Nov 1994 ...`).
    let current = httpdate::fmt_http_date(now)
        .get(12..16)
        .and_then(number)
        .unwrap_or(1970);
    let year = current / 100 * 100 + yy;
    if year > current + 50 {
        year - 100
    } else if year + 50 <= current {
        year + 100
    } else {
        year
    }
}

fn is_leap(year: u64) -> bool {
    year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
}

/// Days in `month` (0-based) of `year`.
fn days_in_month(year: u64, month: usize) -> u64 {
    match month {
        1 if is_leap(year) => 29,
        1 => 28,
        3 | 5 | 8 | 10 => 30,
        _ => 31,
    }
}

/// Days from 1970-01-01 to `year`-`month`(0-based)-`day` in the proleptic Gregorian
/// calendar (Howard Hinnant's `days_from_civil`).
fn days_from_epoch(year: u64, month: usize, day: u64) -> i64 {
    // Years and days are at most 4 digits: no overflow in i64.
    let (year, month, day) = (year as i64, month as i64 + 1, day as i64);
    let year = if month <= 2 { year - 1 } else { year };
    let era = year.div_euclid(400);
    let year_of_era = year - era * 400;
    let day_of_year = (153 * ((month + 9) % 12) + 2) / 5 + day - 1;
    let day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
    era * 146_097 + day_of_era - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 1994-11-06 08:49:37 UTC, RFC 9110's example.
    const EXAMPLE: u64 = 784_111_777;

    fn at(text: &str) -> Option<u64> {
        let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_790_000_000); // 2026
        parse(text, now).map(|t| {
            t.duration_since(SystemTime::UNIX_EPOCH)
                .expect("after the epoch")
                .as_secs()
        })
    }

    #[test]
    fn the_three_forms_in_any_case() {
        for text in [
            "Sun, 06 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-94 08:49:37 GMT",
            "Sun Nov  6 08:49:37 1994",
            "sun, 06 nov 1994 08:49:37 gmt",
            "SUNDAY, 06-NOV-94 08:49:37 GMT",
            "sun NOV  6 08:49:37 1994",
            // Whitespace around the value is not part of it.
            " Sun, 06 Nov 1994 08:49:37 GMT\t",
            // A one-digit day: two digits in asctime, or one after a single space.
            "Sun Nov 06 08:49:37 1994",
            "Sun Nov 6 08:49:37 1994",
            "Sun, 6 Nov 1994 08:49:37 GMT",
            // The day name is redundant: a wrong one does not change the date.
            "Mon, 06 Nov 1994 08:49:37 GMT",
        ] {
            assert_eq!(at(text), Some(EXAMPLE), "{text}");
        }
        assert_eq!(
            httpdate::parse_http_date("Sun, 06 Nov 1994 08:49:37 GMT")
                .ok()
                .and_then(|t| t.duration_since(SystemTime::UNIX_EPOCH).ok())
                .map(|d| d.as_secs()),
            Some(EXAMPLE),
            "agrees with httpdate"
        );
    }

    #[test]
    fn invalid_dates_are_refused() {
        for text in [
            "0",
            "",
            "Sun, 06 Nov 1994 08:49:37",
            "Sun, 06 Nov 1994 08:49:37 PST",
            "Sun, 31 Nov 1994 08:49:37 GMT",
            "Sun, 29 Feb 1995 08:49:37 GMT",
            "Sun, 06 Nov 1994 24:00:00 GMT",
            "Sun, 06 Nov 1994 08:49 GMT",
            "Sun, 06 Nov 94 08:49:37 GMT",
            "Funday, 06 Nov 1994 08:49:37 GMT",
            "Sun, +6 Nov 1994 08:49:37 GMT",
            "Sunday, 06-Nov-1994 08:49:37 GMT",
        ] {
            assert_eq!(at(text), None, "{text:?}");
        }
        assert!(at("Thu, 29 Feb 1996 00:00:00 GMT").is_some(), "a leap day");
    }

    #[test]
    fn a_date_without_its_comma_or_with_a_run_of_spaces_is_refused() {
        for text in [
            // IMF-fixdate and RFC 850 without the comma after the day name.
            "Sun 06 Nov 2094 08:49:37 GMT",
            "Sunday 06-Nov-94 08:49:37 GMT",
            "Sun , 06 Nov 2094 08:49:37 GMT",
            // asctime with one.
            "Sun, Nov  6 08:49:37 1994",
            // Runs of spaces between fields.
            "Sun,  06 Nov 2094 08:49:37 GMT",
            "Sun, 06  Nov 2094 08:49:37 GMT",
            "Sun, 06 Nov  2094 08:49:37 GMT",
            "Sun, 06 Nov 2094  08:49:37 GMT",
            "Sun, 06 Nov 2094 08:49:37  GMT",
            "Sunday, 06-Nov-94  08:49:37 GMT",
            "Sun  Nov  6 08:49:37 1994",
            "Sun Nov   6 08:49:37 1994",
            "Sun Nov  06 08:49:37 1994",
            "Sun Nov  6  08:49:37 1994",
            // A tab is not the space the grammar has.
            "Sun,\t06 Nov 2094 08:49:37 GMT",
        ] {
            assert_eq!(at(text), None, "{text:?}");
            // A client's If-Modified-Since and If-Range dates are read by httpdate: it
            // refuses them as well, so every date field agrees.
            assert!(httpdate::parse_http_date(text).is_err(), "{text:?}");
        }
        assert!(
            at("Sun, 06 Nov 2094 08:49:37 GMT").is_some(),
            "the same date, well formed"
        );
    }

    proptest::proptest! {
        /// What the fixed-layout reading of IMF-fixdate makes of a text laid out as one,
        /// valid or not (names in any case or none, out-of-range numbers, other bytes in
        /// the digits), is what the general reading makes of it.
        #[test]
        fn the_fixed_layout_reading_agrees_with_the_general_one(
            day_name in "sun|mon|tue|wed|thu|fri|sat|sux",
            day in "[0-3][0-9]|[0-9 +a]{2}",
            month in "jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec|jux",
            year in "[0-9]{4}|[0-9]{3}[a ]",
            hours in "[0-2][0-9]|[0-9 ]{2}",
            minutes in "[0-6][0-9]|[0-9a]{2}",
            seconds in "[0-6][0-9]",
            gmt in "gmt|gmx",
            upper in proptest::collection::vec(proptest::bool::ANY, 29),
        ) {
            let text: String = format!("{day_name}, {day} {month} {year} {hours}:{minutes}:{seconds} {gmt}")
                .chars()
                .zip(upper)
                .map(|(c, upper)| if upper { c.to_ascii_uppercase() } else { c })
                .collect();
            let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_790_000_000);
            proptest::prop_assert_eq!(text.len(), 29);
            let general = fields(&text, now);
            match imf_fixdate(text.as_bytes()) {
                Some(fixed) => proptest::prop_assert_eq!(Some(fixed), general, "{}", text),
                // Refused by position: the general reading refuses it too, or reads it
                // (a one-digit day after a space) where `parse` falls back to it.
                None => proptest::prop_assert_eq!(parse(&text, now).is_some(), general.is_some()),
            }
        }
    }

    #[test]
    fn two_digit_years_are_within_fifty_years_ahead() {
        // In 2026: "76" is 2076 (50 years ahead), "77" is 1977 (51 years ahead).
        let year_of = |yy: &str| {
            let text = format!("Sunday, 01-Jan-{yy} 00:00:00 GMT");
            let secs = at(&text).expect("valid");
            httpdate::fmt_http_date(SystemTime::UNIX_EPOCH + Duration::from_secs(secs))[12..16]
                .to_owned()
        };
        assert_eq!(year_of("76"), "2076");
        assert_eq!(year_of("77"), "1977");
        assert_eq!(year_of("26"), "2026");
        assert_eq!(year_of("00"), "2000");
    }
}
