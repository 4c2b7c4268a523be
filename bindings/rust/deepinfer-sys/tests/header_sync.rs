//! The hand-written declarations of src/lib.rs against deepinfer.h and the library's list of
//! exported symbols: every function with its parameter names and types and its return type, every
//! type alias, opaque struct and constant. A difference fails with the names involved.
//!
//! Inputs: `DEEPINFER_HEADER` and `DEEPINFER_SYMBOLS` (default: the repository's
//! capi/include/deepinfer.h and capi/exported_symbols.txt); when `DEEPINFER_INCLUDE_DIR` is set,
//! the deepinfer.h installed there is checked as well.

use std::collections::BTreeMap;
use std::env;
use std::fs;
use std::path::{Path, PathBuf};

/// Everything a header or a Rust file declares, in Rust spelling.
#[derive(Default, Debug)]
struct Decls {
    /// name -> "(param: type, ...) -> ret" with whitespace removed.
    functions: BTreeMap<String, String>,
    /// name -> aliased type (integer aliases and callback types).
    aliases: BTreeMap<String, String>,
    opaque: Vec<String>,
    /// name -> (type or "" when untyped, value).
    constants: BTreeMap<String, (String, i64)>,
}

fn repo_file(var: &str, relative: &str) -> PathBuf {
    match env::var_os(var) {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../..")
            .join(relative),
    }
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| {
        panic!(
            "cannot read {} ({e}); set DEEPINFER_HEADER and DEEPINFER_SYMBOLS to deepinfer.h and \
             exported_symbols.txt of the DeepInfer source tree",
            path.display()
        )
    })
}

fn strip_block_comments(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(start) = rest.find("/*") {
        out.push_str(&rest[..start]);
        let end = rest[start..].find("*/").expect("unterminated comment") + start + 2;
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

fn squash(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

fn rust_base(c: &str) -> String {
    match c {
        "char" => "c_char",
        "void" => "c_void",
        "int32_t" => "i32",
        "uint32_t" => "u32",
        "int64_t" => "i64",
        "uint64_t" => "u64",
        "size_t" => "usize",
        "float" => "f32",
        "double" => "f64",
        other if other.starts_with("di_") => other,
        other => panic!("unmapped C type `{other}`"),
    }
    .to_string()
}

/// A C declaration ("const int32_t **data") as (name, Rust type); `named` false for a return type.
fn c_decl(decl: &str, named: bool) -> (String, String) {
    let spaced = decl.replace('*', " * ");
    let mut tokens: Vec<&str> = spaced.split_whitespace().collect();
    let name = if named {
        tokens.pop().expect("parameter without a name").to_string()
    } else {
        String::new()
    };
    let mut base_const = false;
    let mut base = None;
    let mut pointers = 0;
    for t in tokens {
        match t {
            "const" if pointers == 0 => base_const = true,
            "const" => {} // a const pointer itself: no difference for an FFI declaration
            "*" => pointers += 1,
            other => base = Some(rust_base(other)),
        }
    }
    let mut ty = base.expect("declaration without a type");
    for level in 0..pointers {
        let qualifier = if level == 0 && base_const {
            "*const "
        } else {
            "*mut "
        };
        ty = format!("{qualifier}{ty}");
    }
    (name, ty)
}

fn c_params(params: &str) -> String {
    let params = params.trim();
    if params == "void" || params.is_empty() {
        return String::new();
    }
    params
        .split(',')
        .map(|p| {
            let (name, ty) = c_decl(p, true);
            format!("{name}:{ty}")
        })
        .collect::<Vec<_>>()
        .join(",")
}

fn signature(params: &str, ret: &str) -> String {
    if ret.is_empty() || ret == "c_void" {
        squash(&format!("({params})"))
    } else {
        squash(&format!("({params})->{ret}"))
    }
}

fn parse_header(text: &str) -> Decls {
    let text = strip_block_comments(text);
    let mut d = Decls::default();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.len() == 3 && words[0] == "#define" && words[1].starts_with("DI_") {
            if let Ok(v) = words[2].parse() {
                d.constants.insert(words[1].to_string(), (String::new(), v));
            }
        }
    }
    let code: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .collect::<Vec<_>>()
        .join("\n");
    for stmt in code.split(';') {
        let stmt = stmt.trim().trim_start_matches(['{', '}']).trim();
        let stmt = stmt.strip_prefix("extern \"C\" {").unwrap_or(stmt).trim();
        if let Some(rest) = stmt.strip_prefix("DI_API ") {
            let open = rest.find('(').expect("prototype without parameters");
            let close = rest.rfind(')').expect("prototype without ')'");
            let (name, ret) = c_decl(&rest[..open], true);
            d.functions
                .insert(name, signature(&c_params(&rest[open + 1..close]), &ret));
        } else if let Some(rest) = stmt.strip_prefix("typedef struct ") {
            let words: Vec<&str> = rest.split_whitespace().collect();
            assert_eq!(words.len(), 2, "unexpected typedef: {stmt}");
            d.opaque.push(words[1].to_string());
        } else if let Some(rest) = stmt.strip_prefix("typedef ") {
            if let Some(star) = rest.find("(*") {
                // typedef RET (*name)(params)
                let ret = c_decl(&rest[..star], false).1;
                let name_end = rest[star..].find(')').unwrap() + star;
                let name = rest[star + 2..name_end].trim().to_string();
                let params_start = rest[name_end..].find('(').unwrap() + name_end;
                let params = c_params(&rest[params_start + 1..rest.rfind(')').unwrap()]);
                let f = signature(&params, &ret);
                d.aliases
                    .insert(name, format!("Option<unsafeextern\"C\"fn{f}>"));
            } else {
                let (name, ty) = c_decl(rest, true);
                d.aliases.insert(name, ty);
            }
        } else if let Some(rest) = stmt.strip_prefix("enum ") {
            let open = rest.find('{').expect("enum without a body");
            let ty = rest[..open]
                .trim()
                .strip_suffix("_values")
                .expect("enum not named <type>_values");
            let body = rest[open + 1..].trim_end_matches('}');
            for item in body.split(',').filter(|i| !i.trim().is_empty()) {
                let (name, value) = item.split_once('=').expect("enum value without '='");
                d.constants.insert(
                    name.trim().to_string(),
                    (ty.to_string(), value.trim().parse().unwrap()),
                );
            }
        }
    }
    d
}

/// The Rust file: line comments and attributes dropped, then `pub` items read up to their `;`.
fn parse_rust(text: &str) -> Decls {
    let code: String = text
        .lines()
        .map(|l| l.split("//").next().unwrap())
        .filter(|l| !l.trim_start().starts_with("#["))
        .collect::<Vec<_>>()
        .join("\n");
    let mut d = Decls::default();
    if let Some(start) = code.find("opaque! {") {
        let body = &code[start + "opaque! {".len()..];
        let body = &body[..body.find('}').unwrap()];
        d.opaque = body
            .split(';')
            .map(|s| s.trim().to_string())
            .filter(|s| !s.is_empty())
            .collect();
    }
    let mut rest = code.as_str();
    while let Some(at) = rest.find("pub ") {
        rest = &rest[at + 4..];
        let end = rest.find(';').unwrap();
        let item = rest[..end].trim();
        if let Some(f) = item.strip_prefix("fn ") {
            let open = f.find('(').unwrap();
            let name = f[..open].trim().to_string();
            // Parameter names spelt with a trailing `_` avoid Rust keywords (`fn_` for C's `fn`).
            let sig = squash(&f[open..]).replace("fn_:", "fn:");
            d.functions.insert(name, sig.replace(",)", ")"));
        } else if let Some(t) = item.strip_prefix("type ") {
            let (name, ty) = t.split_once('=').unwrap();
            let ty = squash(ty)
                .replace("fn_:", "fn:")
                .replace(",)", ")")
                .replace(",>", ">");
            d.aliases.insert(name.trim().to_string(), ty);
        } else if let Some(c) = item.strip_prefix("const ") {
            let (lhs, value) = c.split_once('=').unwrap();
            let (name, ty) = lhs.split_once(':').unwrap();
            d.constants.insert(
                name.trim().to_string(),
                (ty.trim().to_string(), value.trim().parse().unwrap()),
            );
        }
        rest = &rest[end..];
    }
    d
}

fn compare_maps<V: PartialEq + std::fmt::Debug>(
    what: &str,
    header: &BTreeMap<String, V>,
    rust: &BTreeMap<String, V>,
    problems: &mut Vec<String>,
) {
    for (name, h) in header {
        match rust.get(name) {
            None => problems.push(format!(
                "{what} {name} is in the header but not declared in Rust"
            )),
            Some(r) if r != h => problems.push(format!("{what} {name}: header {h:?}, Rust {r:?}")),
            Some(_) => {}
        }
    }
    for name in rust.keys().filter(|n| !header.contains_key(*n)) {
        problems.push(format!(
            "{what} {name} is declared in Rust but not in the header"
        ));
    }
}

fn check_against(header_path: &Path, rust: &Decls) -> Vec<String> {
    let mut header = parse_header(&read(header_path));
    assert!(
        header.functions.len() > 100,
        "parsed only {} prototypes of {}",
        header.functions.len(),
        header_path.display()
    );
    let mut problems = Vec::new();
    compare_maps(
        "function",
        &header.functions,
        &rust.functions,
        &mut problems,
    );
    compare_maps("type", &header.aliases, &rust.aliases, &mut problems);
    // #defines carry no C type: compare their values only.
    for (name, (ty, _)) in header.constants.iter_mut() {
        if ty.is_empty() {
            *ty = rust
                .constants
                .get(name)
                .map(|c| c.0.clone())
                .unwrap_or_default();
        }
    }
    compare_maps(
        "constant",
        &header.constants,
        &rust.constants,
        &mut problems,
    );
    let (mut h, mut r) = (header.opaque.clone(), rust.opaque.clone());
    h.sort();
    r.sort();
    if h != r {
        problems.push(format!("opaque structs: header {h:?}, Rust {r:?}"));
    }
    problems
        .into_iter()
        .map(|p| format!("{}: {p}", header_path.display()))
        .collect()
}

fn rust_decls() -> Decls {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/lib.rs");
    parse_rust(&read(&path))
}

#[test]
fn declarations_match_the_header() {
    let rust = rust_decls();
    let mut problems = check_against(
        &repo_file("DEEPINFER_HEADER", "capi/include/deepinfer.h"),
        &rust,
    );
    if let Some(dir) = env::var_os("DEEPINFER_INCLUDE_DIR") {
        problems.extend(check_against(&Path::new(&dir).join("deepinfer.h"), &rust));
    }
    assert!(
        problems.is_empty(),
        "deepinfer-sys differs from deepinfer.h:\n{}",
        problems.join("\n")
    );
}

#[test]
fn every_exported_symbol_is_declared() {
    let rust = rust_decls();
    let path = repo_file("DEEPINFER_SYMBOLS", "capi/exported_symbols.txt");
    let mut exported = Vec::new();
    for line in read(&path).lines().filter(|l| !l.trim().is_empty()) {
        let mut words = line.split_whitespace();
        let name = words.next().unwrap();
        let node = words
            .next()
            .unwrap_or_else(|| panic!("{}: `{line}` names no version node", path.display()));
        assert!(
            node.starts_with("DEEPINFER_"),
            "{}: bad version node in `{line}`",
            path.display()
        );
        exported.push(name.to_string());
    }
    let missing: Vec<_> = exported
        .iter()
        .filter(|n| !rust.functions.contains_key(*n))
        .collect();
    let extra: Vec<_> = rust
        .functions
        .keys()
        .filter(|n| !exported.contains(n))
        .collect();
    assert!(
        missing.is_empty(),
        "exported but not declared in deepinfer-sys: {missing:?}"
    );
    assert!(
        extra.is_empty(),
        "declared in deepinfer-sys but not exported by the library: {extra:?}"
    );
}

/// The parsers themselves: a known prototype and callback come out in Rust spelling.
#[test]
fn parsers_agree_on_samples() {
    let h = parse_header(
        "typedef int32_t di_code;\ntypedef struct di_x di_x;\n\
         typedef void (*di_cb)(void *user, const char *m, size_t len);\n\
         enum di_code_values { DI_A = 0, DI_B = 7 };\n#define DI_V 3\n\
         DI_API di_error *di_f(const di_x *x, const int32_t **data, size_t *len);\nDI_API uint32_t di_g(void);",
    );
    let r = parse_rust(
        "opaque! { /// doc\n di_x; }\npub type di_code = i32;\n\
         pub type di_cb = Option<unsafe extern \"C\" fn(user: *mut c_void, m: *const c_char, len: usize)>;\n\
         pub const DI_A: di_code = 0;\npub const DI_B: di_code = 7;\npub const DI_V: u32 = 3;\n\
         extern \"C\" {\n    /// doc\n    pub fn di_f(\n        x: *const di_x,\n        data: *mut *const i32,\n        len: *mut usize,\n    ) -> *mut di_error;\n    pub fn di_g() -> u32;\n}",
    );
    assert_eq!(h.functions, r.functions);
    assert_eq!(h.aliases, r.aliases);
    assert_eq!(h.opaque, r.opaque);
    assert_eq!(h.constants["DI_B"], r.constants["DI_B"]);
    assert_eq!(h.constants["DI_V"].1, 3);
    // A changed type is seen.
    let changed = parse_rust("extern \"C\" { pub fn di_g() -> i32; }");
    assert_ne!(h.functions["di_g"], changed.functions["di_g"]);
}
