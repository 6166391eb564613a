//! Environment files: `KEY=VALUE` lines, as `genward run --env-file` reads them on the
//! client's side and the lookup helper (`crate::lookup`) reads a spec's `env_file` before
//! each start. One parser, so a file means the same thing wherever it is named.

use std::fmt;
use std::io::Read;
use std::path::Path;

/// The largest environment file read.
pub const ENV_FILE_MAX: u64 = 1024 * 1024;

/// Why `name` cannot be an environment variable's name, if it cannot.
pub fn check_env_name(name: &str) -> Result<(), &'static str> {
    if name.is_empty() {
        Err("a variable name cannot be empty")
    } else if name.contains('=') {
        Err("a variable name cannot contain '='")
    } else if name.contains('\0') {
        Err("a variable name cannot contain NUL")
    } else if name.chars().any(char::is_whitespace) {
        Err("a variable name cannot contain whitespace")
    } else {
        Ok(())
    }
}

/// Why an env file could not be used: what to tell people, and the OS error that caused it
/// when one did (a missing file is `ENOENT`, not a malformed one), so that a start it fails
/// reports the real errno.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnvFileError {
    /// For people; a parse error names the file and the line.
    pub message: String,
    /// The errno of the open or read that failed; `None` for the file's contents.
    pub errno: Option<i32>,
}

impl EnvFileError {
    fn os(what: &str, e: &std::io::Error) -> EnvFileError {
        EnvFileError {
            message: format!("{what}: {e}"),
            errno: e.raw_os_error(),
        }
    }
}

impl From<String> for EnvFileError {
    fn from(message: String) -> EnvFileError {
        EnvFileError {
            message,
            errno: None,
        }
    }
}

impl fmt::Display for EnvFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Reads an env file: `KEY=VALUE` lines, the value taken literally up to the end of the
/// line (no quotes, no expansion); blank lines and lines starting with `#` are skipped.
/// An error names the line.
pub fn read_env_file(path: &Path) -> Result<Vec<(String, String)>, EnvFileError> {
    let file = std::fs::File::open(path).map_err(|e| EnvFileError::os("cannot open", &e))?;
    let mut bytes = Vec::new();
    file.take(ENV_FILE_MAX + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| EnvFileError::os("cannot read", &e))?;
    if bytes.len() as u64 > ENV_FILE_MAX {
        return Err(format!("larger than {ENV_FILE_MAX} bytes").into());
    }
    Ok(parse_env_file(&bytes, &path.display().to_string())?)
}

/// Parses the contents of env file `name` (see [`read_env_file`]).
pub fn parse_env_file(bytes: &[u8], name: &str) -> Result<Vec<(String, String)>, String> {
    let mut vars = Vec::new();
    for (i, line) in bytes.split(|&b| b == b'\n').enumerate() {
        let at = format!("{name}:{}", i + 1);
        let line = std::str::from_utf8(line).map_err(|_| format!("{at}: not valid UTF-8"))?;
        let line = line.strip_suffix('\r').unwrap_or(line);
        let trimmed = line.trim_start();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let Some((k, v)) = trimmed.split_once('=') else {
            return Err(format!("{at}: expected KEY=VALUE, got `{line}`"));
        };
        check_env_name(k).map_err(|why| format!("{at}: {why}"))?;
        if v.contains('\0') {
            return Err(format!("{at}: a value cannot contain NUL"));
        }
        vars.push((k.to_string(), v.to_string()));
    }
    Ok(vars)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn env_files_skip_comments_and_name_a_bad_line() {
        let vars = parse_env_file(b"# c\n\nA=1\r\n  B=x=y # not a comment\nC=\n", "f").unwrap();
        let want = [("A", "1"), ("B", "x=y # not a comment"), ("C", "")];
        let want: Vec<(String, String)> = want
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        assert_eq!(vars, want);
        let e = parse_env_file(b"A=1\n\nbroken line\n", "vars.env").unwrap_err();
        assert!(e.starts_with("vars.env:3: expected KEY=VALUE"), "{e}");
        let e = parse_env_file(b"=1\n", "f").unwrap_err();
        assert!(e.starts_with("f:1: ") && e.contains("empty"), "{e}");
        let e = parse_env_file(b"A=\xff\n", "f").unwrap_err();
        assert_eq!(e, "f:1: not valid UTF-8");
    }
}
