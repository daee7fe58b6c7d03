//! How `kubectl juneau` prints: JSON (`-o json`) or a table.
/// How a command prints its rows.
#[derive(Clone, Copy, clap::ValueEnum)]
pub enum Output {
    Table,
    Json,
}

pub fn json<T: serde::Serialize>(rows: &T) {
    println!(
        "{}",
        serde_json::to_string_pretty(rows).expect("rows serialize")
    );
}

/// Rows as JSON, or as the table `table` renders.
pub fn show<T: serde::Serialize>(rows: &[T], output: Output, table: fn(&[T]) -> String) {
    match output {
        Output::Json => json(&rows),
        Output::Table => print!("{}", table(rows)),
    }
}

/// Named counters (drops, the router's).
pub fn counters(rows: &[(String, u64)], what: &str, output: Output) {
    match output {
        Output::Json => json(&rows),
        Output::Table => {
            println!("{what:<20} {:>10}", "COUNT");
            for (r, n) in rows {
                println!("{r:<20} {n:>10}");
            }
        }
    }
}

/// A protocol number as the tables print it.
pub fn proto(p: u8) -> String {
    match p {
        1 => "icmp".into(),
        6 => "tcp".into(),
        17 => "udp".into(),
        132 => "sctp".into(),
        other => other.to_string(),
    }
}
