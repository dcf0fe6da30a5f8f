// The oracle of bs_quote_debug (src/core/request_err.c): which characters
// Rust's `{:?}` of a string writes escaped, and how. Prints the ranges of
// scalar values whose one-character string is not printed as itself, one
// "START END" line (hex) per range of equal kind: "u" for \u{hex}, or the
// fixed escape (\0 \t \n \r \" \\). tests/test_request.c compares every
// scalar value with this table. Regenerate where rustc is installed:
//   RDE_RUSTC="$(rustc --version)" rustc -O tools/rust-debug-escapes.rs -o /tmp/rde &&
//   /tmp/rde > tests/data/rust-debug-escapes.txt
fn main() {
    println!("# rust-debug-escapes: START END KIND (hex; KIND u = \\u{{hex}}, else the escape) from {}", env!("RDE_RUSTC"));
    let mut run: Option<(u32, u32, String)> = None;
    for cp in 0u32..0x110000 {
        let Some(c) = char::from_u32(cp) else { continue };
        let s = c.to_string();
        let d = format!("{:?}", s);
        let inner = &d[1..d.len() - 1];
        let kind = if inner == s {
            None
        } else if inner == format!("\\u{{{:x}}}", cp) {
            Some("u".to_string())
        } else {
            Some(inner.to_string())
        };
        match (&mut run, kind) {
            (Some((_, end, k)), Some(kind)) if *end + 1 == cp && *k == kind && kind == "u" => *end = cp,
            (r, kind) => {
                if let Some((a, b, k)) = r.take() {
                    println!("{:x} {:x} {}", a, b, k);
                }
                *r = kind.map(|k| (cp, cp, k));
            }
        }
    }
    if let Some((a, b, k)) = run {
        println!("{:x} {:x} {}", a, b, k);
    }
}
