//! Kubernetes resource quantities ("100m", "0.5", "128Mi", "1G", "1e9"), for the
//! proxy's CPU and memory requests. The grammar is small and fixed (apimachinery's
//! `resource.Quantity`), and the crates that implement it pull in the whole
//! Kubernetes API types, so it lives here, with tests.

/// A quantity's value in base units (cores for CPU, bytes for memory), or why it is
/// not one.
pub fn parse(text: &str) -> Result<f64, String> {
    let s = text.trim();
    if s.is_empty() {
        return Err("is empty".into());
    }
    if s.len() > 64 {
        return Err("is longer than 64 characters".into());
    }
    // The number is everything up to the first character that cannot be part of it;
    // a trailing e/E followed by digits is a decimal exponent, not a suffix.
    let split = s
        .char_indices()
        .find(|(_, c)| !(c.is_ascii_digit() || *c == '.' || *c == '+' || *c == '-'))
        .map(|(i, _)| i)
        .unwrap_or(s.len());
    let (number, suffix) = s.split_at(split);
    let value: f64 = number
        .parse()
        .map_err(|_| format!("{text:?} is not a number with an optional unit suffix"))?;
    if value < 0.0 {
        return Err(format!("{text:?} is negative"));
    }
    let factor = match suffix {
        "" => 1.0,
        "n" => 1e-9,
        "u" => 1e-6,
        "m" => 1e-3,
        "k" => 1e3,
        "M" => 1e6,
        "G" => 1e9,
        "T" => 1e12,
        "P" => 1e15,
        "E" => 1e18,
        "Ki" => 1024.0,
        "Mi" => 1024.0 * 1024.0,
        "Gi" => 1024.0 * 1024.0 * 1024.0,
        "Ti" => 1024f64.powi(4),
        "Pi" => 1024f64.powi(5),
        "Ei" => 1024f64.powi(6),
        exp if exp.starts_with(['e', 'E']) => {
            let e: i32 = exp[1..]
                .parse()
                .map_err(|_| format!("{text:?} has an unknown unit suffix {exp:?}"))?;
            if !(-30..=30).contains(&e) {
                return Err(format!("{text:?} has an exponent out of range"));
            }
            10f64.powi(e)
        }
        other => {
            return Err(format!(
                "{text:?} has an unknown unit suffix {other:?} (use m for millicores, Mi or Gi for memory)"
            ))
        }
    };
    let v = value * factor;
    if !v.is_finite() {
        return Err(format!("{text:?} is out of range"));
    }
    Ok(v)
}

/// CPU in millicores (rounded up, as Kubernetes does).
pub fn cpu_millicores(text: &str) -> Result<u64, String> {
    parse(text).map(|v| (v * 1000.0 - 1e-9).ceil().max(0.0) as u64)
}

/// Memory in bytes (rounded up).
pub fn memory_bytes(text: &str) -> Result<u64, String> {
    parse(text).map(|v| (v - 1e-9).ceil().max(0.0) as u64)
}

/// A change in a quantity as text, with `+` when it grows (`+250m`, `-1.5Gi`).
pub fn signed_text(n: i64, text: String) -> String {
    if n > 0 {
        format!("+{text}")
    } else {
        text
    }
}

/// "2.4", "0.25", "-0.4": cores, without trailing zeros.
pub fn cores_text(millicores: i64) -> String {
    let sign = if millicores < 0 { "-" } else { "" };
    let m = millicores.unsigned_abs();
    let whole = m / 1000;
    let frac = m % 1000;
    if frac == 0 {
        format!("{sign}{whole}")
    } else {
        let f = format!("{frac:03}");
        format!("{sign}{whole}.{}", f.trim_end_matches('0'))
    }
}

/// "3 GiB", "1.5 GiB", "256 MiB", "-512 MiB": binary units, at most two decimals.
pub fn bytes_text(bytes: i64) -> String {
    let sign = if bytes < 0 { "-" } else { "" };
    let b = bytes.unsigned_abs() as f64;
    let (value, unit) = if b >= 1024f64.powi(3) {
        (b / 1024f64.powi(3), "GiB")
    } else if b >= 1024f64.powi(2) {
        (b / 1024f64.powi(2), "MiB")
    } else if b >= 1024.0 {
        (b / 1024.0, "KiB")
    } else {
        (b, "B")
    };
    let text = format!("{value:.2}");
    let text = text.trim_end_matches('0').trim_end_matches('.');
    format!("{sign}{text} {unit}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu() {
        assert_eq!(cpu_millicores("100m"), Ok(100));
        assert_eq!(cpu_millicores("0.5"), Ok(500));
        assert_eq!(cpu_millicores("2"), Ok(2000));
        assert_eq!(cpu_millicores("1500u"), Ok(2));
        assert!(cpu_millicores("lots").is_err());
        assert!(cpu_millicores("-1").is_err());
        assert!(cpu_millicores("100 m").is_err());
    }

    #[test]
    fn memory() {
        assert_eq!(memory_bytes("128Mi"), Ok(128 * 1024 * 1024));
        assert_eq!(memory_bytes("1G"), Ok(1_000_000_000));
        assert_eq!(memory_bytes("1e3"), Ok(1000));
        assert_eq!(memory_bytes("1.5Gi"), Ok(1536 * 1024 * 1024));
        let e = memory_bytes("128MB").unwrap_err();
        assert!(e.contains("unknown unit suffix \"MB\""), "{e}");
    }

    #[test]
    fn texts() {
        assert_eq!(cores_text(2400), "2.4");
        assert_eq!(cores_text(250), "0.25");
        assert_eq!(cores_text(-400), "-0.4");
        assert_eq!(cores_text(3000), "3");
        assert_eq!(bytes_text(24 * 128 * 1024 * 1024), "3 GiB");
        assert_eq!(bytes_text(-512 * 1024 * 1024), "-512 MiB");
        assert_eq!(bytes_text(1536 * 1024 * 1024), "1.5 GiB");
    }
}
