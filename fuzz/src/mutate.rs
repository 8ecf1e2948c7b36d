//! The structure-aware mutator: edits that keep a program close to the
//! text format, so most mutants get past the lexer and many past the
//! verifier.
//!
//! Every edit works on whole tokens or whole lines of a seed: a token is
//! replaced by another from the dictionary (mnemonics, qualifiers, words of
//! the seeds), a number by a boundary number, a line is deleted, duplicated
//! or spliced in from another seed, and a range of lines is wrapped in a
//! `for` of a boundary trip count or an `if` on the thread index.

use cpflow::ir::spec::{Family, Qual};

/// A xorshift64* generator: reproducible from its seed, no dependencies.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// A number in `0..n` (`n > 0`).
    pub fn below(&mut self, n: usize) -> usize {
        (self.next_u64() % n.max(1) as u64) as usize
    }

    pub fn pick<'a, T>(&mut self, items: &'a [T]) -> &'a T {
        &items[self.below(items.len())]
    }
}

/// Numbers at the edges of every range a user's number can reach: sizes,
/// alignments, trip counts, array indices, `i32`/`u32`/`i64`/`u64`.
pub const BOUNDARY: &[&str] = &[
    "0",
    "1",
    "-1",
    "2",
    "3",
    "4",
    "8",
    "15",
    "16",
    "17",
    "32",
    "128",
    "255",
    "256",
    "4095",
    "4096",
    "65535",
    "65536",
    "1048576",
    "2147483647",
    "2147483648",
    "-2147483648",
    "4294967295",
    "4294967296",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "0xffffffff",
    "0x7fffffffffffffff",
];

/// Tokens of the seeds and of the instruction table, and the seeds' lines.
pub struct Dictionary {
    pub tokens: Vec<String>,
    pub lines: Vec<String>,
}

impl Dictionary {
    pub fn new(seeds: &[String]) -> Dictionary {
        let mut tokens: Vec<String> = Family::ALL
            .iter()
            .map(|f| f.mnemonic().to_string())
            .chain(Qual::ALL.iter().map(|q| q.to_string()))
            .chain(BOUNDARY.iter().map(|b| b.to_string()))
            .collect();
        let mut lines = Vec::new();
        for s in seeds {
            for l in s.lines() {
                tokens.extend(words(l).map(str::to_string));
                if !l.trim().is_empty() {
                    lines.push(l.to_string());
                }
            }
        }
        tokens.sort();
        tokens.dedup();
        lines.sort();
        lines.dedup();
        Dictionary { tokens, lines }
    }
}

/// The words of a line: runs of characters that are not spaces or `,()[]{}:=`.
fn words(line: &str) -> impl Iterator<Item = &str> {
    line.split(|c: char| c.is_whitespace() || ",()[]{}=".contains(c))
        .filter(|w| !w.is_empty())
}

/// Byte ranges of the words of `text`.
fn word_ranges(text: &str) -> Vec<(usize, usize)> {
    let mut out = Vec::new();
    let mut start = None;
    for (i, c) in text.char_indices() {
        let sep = c.is_whitespace() || ",()[]{}=".contains(c);
        match (sep, start) {
            (true, Some(s)) => {
                out.push((s, i));
                start = None;
            }
            (false, None) => start = Some(i),
            _ => {}
        }
    }
    if let Some(s) = start {
        out.push((s, text.len()));
    }
    out
}

fn is_number(w: &str) -> bool {
    let w = w.strip_prefix('-').unwrap_or(w);
    !w.is_empty() && w.chars().all(|c| c.is_ascii_hexdigit() || c == 'x')
}

/// One edit of `text`; `n` names introduced by the edit are unique.
pub fn mutate(text: &str, dict: &Dictionary, rng: &mut Rng, n: u64) -> String {
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    if lines.is_empty() {
        return rng.pick(&dict.lines).clone();
    }
    let at = rng.below(lines.len());
    match rng.below(10) {
        // A word replaced by a dictionary token.
        0 | 1 => replace_word(&mut lines[at], rng, |rng, _| rng.pick(&dict.tokens).clone()),
        // A number replaced by a boundary number, or a nearby one.
        2 | 3 => replace_word(&mut lines[at], rng, |rng, w| {
            if is_number(w) && rng.below(2) == 0 {
                let v: i128 = w.parse().unwrap_or(0);
                let d = [-1i128, 1, 16, -16][rng.below(4)];
                (v + d).to_string()
            } else {
                rng.pick(BOUNDARY).to_string()
            }
        }),
        // A qualifier added to or dropped from a mnemonic.
        4 => replace_word(&mut lines[at], rng, |rng, w| match w.rsplit_once('.') {
            Some((head, _)) if rng.below(2) == 0 => head.to_string(),
            _ => format!("{w}{}", rng.pick(Qual::ALL)),
        }),
        5 => {
            lines.remove(at);
        }
        6 => {
            let l = lines[at].clone();
            lines.insert(at, l);
        }
        7 => lines.insert(at, rng.pick(&dict.lines).clone()),
        8 => {
            let end = (at + 1 + rng.below(6)).min(lines.len());
            let trips = rng.pick(BOUNDARY);
            lines.insert(end, "}".into());
            lines.insert(at, format!("for %fz{n} = 0 to {trips} step 1 {{"));
        }
        _ => {
            let end = (at + 1 + rng.below(6)).min(lines.len());
            lines.insert(end, "}".into());
            lines.insert(at, format!("if %fzc{n} {{"));
            lines.insert(at, format!("%fzc{n} = cmp.ult %fzt{n}, 16 : i32"));
            lines.insert(at, format!("%fzt{n} = sreg tid.x"));
        }
    }
    let mut out = lines.join("\n");
    out.push('\n');
    out
}

/// Replaces one word of `line` (if it has any) by `with(rng, word)`.
fn replace_word(line: &mut String, rng: &mut Rng, with: impl Fn(&mut Rng, &str) -> String) {
    let ranges = word_ranges(line);
    if ranges.is_empty() {
        return;
    }
    let (s, e) = *rng.pick(&ranges);
    let new = with(rng, &line[s..e]);
    line.replace_range(s..e, &new);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_split_on_operand_punctuation() {
        let w: Vec<&str> = words("  %t = cp.async.ca.shared.global %a, %b, 16").collect();
        assert_eq!(w, ["%t", "cp.async.ca.shared.global", "%a", "%b", "16"]);
        assert_eq!(word_ranges("a, bc"), [(0, 1), (3, 5)]);
    }

    #[test]
    fn mutants_differ_and_are_reproducible() {
        let seed = "module @m target sm_90 ptx 8.0\nkernel @k() {\n  barrier.cta\n}\n".to_string();
        let dict = Dictionary::new(std::slice::from_ref(&seed));
        let run = |s| {
            let mut rng = Rng::new(s);
            (0..50)
                .map(|i| mutate(&seed, &dict, &mut rng, i))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7), run(7));
        assert!(run(7).iter().any(|m| *m != seed));
    }
}
