//! `gens/<gen>.json`: one descriptor per live generation, written before its spawn is
//! reported and removed once it is gone.

use super::aside::move_aside;
use super::descriptor::{decode_descriptor, encode_descriptor, Descriptor, MAX_DESCRIPTOR_FILE};
use super::error::StoreError;
use super::highwater::{beyond, MAX_STORED_GEN};
use super::layout::Store;
use super::load::{load_dir, Batch, Place};
use super::names::{gen_file, gen_of_file, GENS_DIR};
use crate::proto::json::FieldError;

impl Store {
    /// Saves `d` atomically and durably: once this returns, a daemon that dies still
    /// leaves the next one a way to find the process.
    pub fn write_descriptor(&self, d: &Descriptor) -> Result<(), StoreError> {
        self.gens
            .write_atomic(&gen_file(d.gen), &encode_descriptor(d))?;
        Ok(())
    }

    /// Removes generation `gen`'s descriptor (a missing one is not an error).
    ///
    /// Not flushed: a removal lost with power leaves a descriptor of a process that is
    /// gone, which the next daemon finds gone (or someone else's) by its identity and
    /// removes. Only a verified exit or a verified mismatch may call this (design,
    /// invariant 5).
    pub fn remove_descriptor(&self, gen: u64) -> Result<(), StoreError> {
        self.gens.unlink(&gen_file(gen))?;
        Ok(())
    }

    /// Moves generation `gen`'s descriptor to `bad/`, logging `why`: one that read well
    /// but cannot be taken back (a copy of another's, naming the same process).
    pub fn set_aside_descriptor(&self, gen: u64, why: &str) {
        move_aside(&self.gens, GENS_DIR, &gen_file(gen), &self.bad, why);
    }

    /// Reads every descriptor (at most `max`), by generation. A bad file — corrupt,
    /// foreign, misnamed, for another generation than its name says, or from another
    /// state directory (its `dir_id`) — is moved aside and counted, never returned.
    pub fn load_descriptors(&self, max: usize) -> Result<Batch<Descriptor>, StoreError> {
        let place = Place {
            dir: &self.gens,
            label: GENS_DIR,
            bad: &self.bad,
        };
        let mut batch = load_dir(
            &place,
            max,
            MAX_DESCRIPTOR_FILE,
            gen_of_file,
            |gen, bytes| {
                let d = decode_descriptor(bytes)?;
                if d.gen >= MAX_STORED_GEN {
                    return Err(FieldError::invalid("gen", beyond(d.gen)).into());
                }
                if d.gen != gen {
                    let why = format!("{} in the file of generation {gen}", d.gen);
                    return Err(FieldError::invalid("gen", why).into());
                }
                if d.dir_id != *self.id() {
                    let why = format!("{} is another state directory's", d.dir_id);
                    return Err(FieldError::invalid("dir_id", why).into());
                }
                Ok(d)
            },
        )?;
        batch.records.sort_by_key(|d| d.gen);
        Ok(batch)
    }
}
