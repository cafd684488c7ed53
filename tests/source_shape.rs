//! Shape checks over the source tree (issue 36 items 5 and 7), so that what was fixed cannot
//! come back silently: no production function in `src/` over [`MAX_FN_LINES`] lines, and the
//! README's Layout names every file and directory under `src/` (and nothing that is gone).
//! These read files only; they need neither root nor the built binary.

use std::fs;
use std::path::{Path, PathBuf};

/// The longest a production function may be, counted from its `fn` line to its closing brace.
const MAX_FN_LINES: usize = 100;

/// Long functions not split yet, listed openly (file, function): the check fails when one of
/// them is no longer long, so this list only shrinks. Issue 36 item 5 empties it.
const NOT_YET_SPLIT: &[(&str, &str)] = &[];

fn src_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = fs::read_dir(dir) else { return };
    let mut entries: Vec<PathBuf> = rd.filter_map(|e| e.ok().map(|e| e.path())).collect();
    entries.sort();
    for p in entries {
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|e| e == "rs") {
            out.push(p);
        }
    }
}

/// The source with comments, string and char literals blanked (newlines kept), so that braces
/// and `fn` inside them do not count.
fn code_only(src: &str) -> String {
    let b: Vec<char> = src.chars().collect();
    let mut out = String::with_capacity(src.len());
    let mut i = 0;
    let blank = |c: char| if c == '\n' { '\n' } else { ' ' };
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < b.len() && b[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
        } else if c == 'r'
            && (next == Some('"') || next == Some('#'))
            && (i == 0 || !(b[i - 1].is_alphanumeric() || b[i - 1] == '_'))
        {
            // raw string r#"..."#
            let mut j = i + 1;
            let mut hashes = 0;
            while b.get(j) == Some(&'#') {
                hashes += 1;
                j += 1;
            }
            if b.get(j) != Some(&'"') {
                out.push(c);
                i += 1;
                continue;
            }
            j += 1;
            loop {
                if j >= b.len() {
                    break;
                }
                if b[j] == '"' && (1..=hashes).all(|k| b.get(j + k) == Some(&'#')) {
                    j += 1 + hashes;
                    break;
                }
                j += 1;
            }
            for &ch in &b[i..j.min(b.len())] {
                out.push(blank(ch));
            }
            i = j;
        } else if c == '"' {
            out.push(' ');
            i += 1;
            while i < b.len() && b[i] != '"' {
                if b[i] == '\\' {
                    out.push(' ');
                    i += 1;
                }
                if i < b.len() {
                    out.push(blank(b[i]));
                    i += 1;
                }
            }
            out.push(' ');
            i += 1;
        } else if c == '\'' {
            // char literal ('x', '\n', '\u{..}') or a lifetime ('a)
            let close = if next == Some('\\') {
                (i + 2..b.len().min(i + 12)).find(|&k| b[k] == '\'')
            } else if b.get(i + 2) == Some(&'\'') {
                Some(i + 2)
            } else {
                None
            };
            match close {
                Some(k) => {
                    for _ in i..=k {
                        out.push(' ');
                    }
                    i = k + 1;
                }
                None => {
                    out.push(c);
                    i += 1;
                }
            }
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// Every function's (name, first line, length in lines), skipping `#[cfg(test)]` items.
fn functions(code: &str) -> Vec<(String, usize, usize)> {
    let lines: Vec<&str> = code.lines().collect();
    // brace depth at the start of each line, and where each `{` closes
    let mut found = Vec::new();
    let mut skip_until_depth: Option<i64> = None;
    let mut pending_test_attr = false;
    let mut depth: i64 = 0;
    let mut open_fns: Vec<(String, usize, i64)> = Vec::new();
    let mut fn_waiting: Option<(String, usize)> = None;
    for (n, line) in lines.iter().enumerate() {
        let t = line.trim();
        if skip_until_depth.is_none() && t.starts_with("#[cfg(test)]") {
            pending_test_attr = true;
        }
        if skip_until_depth.is_none()
            && let Some(name) = fn_name(t)
        {
            fn_waiting = Some((name, n + 1));
        }
        for ch in line.chars() {
            match ch {
                '{' => {
                    if pending_test_attr && skip_until_depth.is_none() {
                        skip_until_depth = Some(depth);
                        pending_test_attr = false;
                        fn_waiting = None;
                    } else if let Some((name, start)) = fn_waiting.take()
                        && skip_until_depth.is_none()
                    {
                        open_fns.push((name, start, depth));
                    }
                    depth += 1;
                }
                '}' => {
                    depth -= 1;
                    if skip_until_depth == Some(depth) {
                        skip_until_depth = None;
                    }
                    if open_fns.last().is_some_and(|f| f.2 == depth)
                        && let Some((name, start, _)) = open_fns.pop()
                    {
                        found.push((name, start, n + 1 - start + 1));
                    }
                }
                ';' => {
                    // a declaration without a body (trait method, extern fn)
                    if open_fns.last().is_none_or(|f| f.2 < depth) || fn_waiting.is_some() {
                        fn_waiting = None;
                    }
                    if pending_test_attr && depth >= 0 && !t.starts_with("#[") {
                        pending_test_attr = false;
                    }
                }
                _ => {}
            }
        }
    }
    found
}

/// The name when the line starts a function item.
fn fn_name(t: &str) -> Option<String> {
    let mut rest = t;
    for prefix in [
        "pub(crate) ",
        "pub(super) ",
        "pub ",
        "const ",
        "async ",
        "unsafe ",
        "extern \"C\" ",
        "extern ",
    ] {
        if let Some(r) = rest.strip_prefix(prefix) {
            rest = r;
        }
    }
    // extern "C" is blanked to `extern     ` by code_only
    let rest = rest.trim_start();
    let rest = rest.strip_prefix("unsafe ").unwrap_or(rest).trim_start();
    let rest = rest.strip_prefix("fn ")?;
    let name: String = rest
        .chars()
        .take_while(|c| c.is_alphanumeric() || *c == '_')
        .collect();
    (!name.is_empty()).then_some(name)
}

/// Files that are whole `#[cfg(test)] mod NAME;` modules (unit tests and their helpers): the
/// declaring file names them, so nothing is exempted by its file name alone.
fn test_only_files(files: &[PathBuf]) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for f in files {
        let Ok(src) = fs::read_to_string(f) else {
            continue;
        };
        let lines: Vec<&str> = src.lines().map(str::trim).collect();
        let dir = match f.file_name().and_then(|n| n.to_str()) {
            Some("mod.rs" | "lib.rs" | "main.rs") => f.parent().map(Path::to_path_buf),
            _ => Some(f.with_extension("")),
        };
        let Some(dir) = dir else { continue };
        for w in lines.windows(2) {
            let decl = w[1]
                .strip_prefix("pub(crate) ")
                .unwrap_or(w[1])
                .strip_prefix("mod ")
                .and_then(|m| m.strip_suffix(';'));
            if let (true, Some(name)) = (w[0] == "#[cfg(test)]", decl) {
                for cand in [
                    dir.join(format!("{name}.rs")),
                    dir.join(name).join("mod.rs"),
                ] {
                    if cand.exists() {
                        out.push(cand);
                    }
                }
            }
        }
    }
    out
}

#[test]
fn no_production_function_over_100_lines() {
    let mut files = Vec::new();
    rust_files(&src_dir(), &mut files);
    assert!(
        files.len() > 50,
        "found only {} files under src/",
        files.len()
    );
    let test_only = test_only_files(&files);
    assert!(
        test_only.len() >= 3,
        "no #[cfg(test)] module files found: {test_only:?}"
    );
    let mut long = Vec::new();
    let mut still_long = Vec::new();
    let mut seen = 0;
    for f in &files {
        let src = fs::read_to_string(f).expect("read source");
        let rel = f.strip_prefix(src_dir()).unwrap_or(f).display().to_string();
        if test_only.contains(f) {
            continue;
        }
        for (name, line, len) in functions(&code_only(&src)) {
            seen += 1;
            let listed = NOT_YET_SPLIT.contains(&(format!("src/{rel}").as_str(), name.as_str()));
            if len > MAX_FN_LINES && listed {
                still_long.push(format!("src/{rel} {name}"));
            } else if len > MAX_FN_LINES {
                long.push(format!("src/{rel}:{line} {name}: {len} lines"));
            }
        }
    }
    assert!(
        seen > 500,
        "found only {seen} functions: the scanner is broken"
    );
    assert!(
        long.is_empty(),
        "production functions over {MAX_FN_LINES} lines (split them into named steps):\n{}",
        long.join("\n")
    );
    let split: Vec<_> = NOT_YET_SPLIT
        .iter()
        .filter(|(f, n)| !still_long.contains(&format!("{f} {n}")))
        .collect();
    assert!(
        split.is_empty(),
        "no longer over {MAX_FN_LINES} lines: remove from NOT_YET_SPLIT: {split:?}"
    );
}

#[test]
fn scanner_measures_functions() {
    let src = "fn a() {\n    let s = \"}\";\n    let c = '{';\n    // }\n}\n#[cfg(test)]\nmod tests {\n    fn t() {\n    }\n}\nfn b<'a>(x: &'a str) -> &'a str {\n    x\n}\n";
    let fns = functions(&code_only(src));
    assert_eq!(
        fns,
        vec![("a".to_string(), 1, 5), ("b".to_string(), 11, 3)],
        "{fns:?}"
    );
}

/// README's Layout block: every top-level file and directory of `src/` is named there as
/// `src/NAME` (`src/NAME/` for a directory), and every `src/…` path it names exists.
#[test]
fn readme_layout_matches_src() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let readme = fs::read_to_string(root.join("README.md")).expect("README.md");
    let start = readme
        .find("## Layout")
        .expect("README has a Layout section");
    let block = &readme[start..];
    let block = block.split("```").nth(1).expect("the Layout code block");
    let named: Vec<&str> = block
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | ',' | '(' | ')' | '`'))
        .filter(|w| w.starts_with("src/"))
        .collect();
    let mut missing = Vec::new();
    let mut entries: Vec<_> = fs::read_dir(src_dir())
        .expect("src/")
        .filter_map(|e| e.ok())
        .collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        let want = if e.path().is_dir() {
            format!("src/{name}/")
        } else {
            format!("src/{name}")
        };
        if !named.contains(&want.as_str()) {
            missing.push(want);
        }
    }
    let gone: Vec<_> = named.iter().filter(|p| !root.join(p).exists()).collect();
    assert!(
        missing.is_empty() && gone.is_empty(),
        "README Layout: not named: {missing:?}; named but absent: {gone:?}"
    );
}
