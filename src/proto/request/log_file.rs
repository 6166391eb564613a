//! The `spawn` request's `log` member, both ways:
//! `{"path": "/var/log/app/web.log", "max_size": 10485760, "keep": 5}`.

use super::fields::{bad, Result};
use crate::core::LogFile;
use crate::proto::error::{ErrorCode, ProtoError};
use crate::proto::json::{FieldError, ObjWriter, Object};

/// Decodes `log` (absent or `null`: no log file). Only the types are checked here; the
/// bounds are the spec's (`LogFile::validate`), which names each member the same way.
pub(super) fn decode(args: &Object) -> Result<Option<LogFile>> {
    let Some(o) = args.opt_object("log").map_err(bad)? else {
        return Ok(None);
    };
    o.check_fields(&["path", "max_size", "keep"]).map_err(|e| {
        bad(FieldError::invalid(
            format!("log.{}", e.field),
            "unknown field",
        ))
    })?;
    let named = |mut e: FieldError| {
        e.field = format!("log.{}", e.field);
        bad(e)
    };
    let path = o
        .opt_str("path")
        .map_err(named)?
        .ok_or_else(|| bad(FieldError::invalid("log.path", "missing")))?;
    let mut log = LogFile::new(path.as_bytes().to_vec());
    if let Some(n) = o.opt_u64("max_size").map_err(named)? {
        log.max_size = n;
    }
    if let Some(n) = o.opt_u64("keep").map_err(named)? {
        // One no spec can hold is refused as the spec's check would, showing it.
        log.keep = u32::try_from(n).map_err(|_| {
            let e = LogFile::too_many_kept(n);
            ProtoError::new(ErrorCode::BadRequest, e.message)
        })?;
    }
    Ok(Some(log))
}

/// Appends `log`, with only the members that differ from the defaults.
pub(super) fn write(
    w: &mut ObjWriter<'_>,
    log: &Option<LogFile>,
) -> std::result::Result<(), FieldError> {
    let Some(log) = log else {
        return Ok(());
    };
    let path = std::str::from_utf8(&log.path).map_err(|_| {
        FieldError::invalid("log.path", "not valid UTF-8, which a request cannot carry")
    })?;
    w.with("log", |out| {
        let mut o = ObjWriter::new(out);
        o.str("path", path);
        if log.max_size != LogFile::DEFAULT_MAX_SIZE {
            o.u64("max_size", log.max_size);
        }
        if log.keep != LogFile::DEFAULT_KEEP {
            o.u64("keep", log.keep.into());
        }
        o.finish();
    });
    Ok(())
}
