//! The few BPF map operations aya does not offer, as raw `bpf(2)` calls and mappings:
//! a batch update (one syscall, and for a map of maps one wait for running programs,
//! for a whole sync), a 4-byte lookup (a map of maps' inner map id), and writing an
//! mmapable array's values through a mapping. Used by the Services' writer.
use aya::maps::MapData;

use super::DataplaneError;

pub(super) fn raw_fd(map: &MapData) -> u32 {
    use std::os::fd::{AsFd, AsRawFd};
    map.fd().as_fd().as_raw_fd() as u32
}

/// Writes `values` into the mmapable array `fd` (a Maglev table) through a shared
/// mapping of its values: one copy instead of a kernel update per slot, each value one
/// 4-byte store. An mmapable array keeps each value in 8 bytes (its element size
/// rounded up).
pub(super) fn write_mapped(fd: u32, values: &[u32]) -> std::io::Result<()> {
    // SAFETY: sysconf has no preconditions.
    let page = unsafe { libc::sysconf(libc::_SC_PAGESIZE) }.max(4096) as usize;
    let len = (values.len() * 8).next_multiple_of(page);
    // SAFETY: a shared mapping of the map's value area, as the kernel offers it for a
    // BPF_F_MMAPABLE array; checked for failure below.
    let at = unsafe {
        libc::mmap(
            std::ptr::null_mut(),
            len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED,
            fd as i32,
            0,
        )
    };
    if at == libc::MAP_FAILED {
        return Err(std::io::Error::last_os_error());
    }
    // SAFETY: `len` bytes are mapped at `at`, page-aligned; `values.len()` slots of 8
    // bytes fit in them, each value in its slot's first 4 bytes.
    unsafe {
        let slots = at.cast::<u8>();
        for (i, v) in values.iter().enumerate() {
            // Volatile: a live table is read by programs on other CPUs meanwhile;
            // each slot is one 4-byte store, never torn or elided.
            slots.add(i * 8).cast::<u32>().write_volatile(*v);
        }
        libc::munmap(at, len);
    }
    Ok(())
}

pub(super) fn batch_err(name: &str, e: std::io::Error) -> DataplaneError {
    DataplaneError::Map {
        name: name.to_owned(),
        source: aya::maps::MapError::SyscallError(aya::sys::SyscallError {
            call: "bpf_map_update_batch",
            io_error: e,
        }),
    }
}

/// `values[i]` at `keys[i]` of the map `fd`, in one `BPF_MAP_UPDATE_BATCH` (4-byte keys
/// and values: a Maglev table's slots, or a map of maps' inner map fds). One syscall
/// instead of one per entry, and for a map of maps one wait for running programs
/// instead of one per entry (~7 ms each here).
pub(super) fn batch_update(fd: u32, keys: &[u32], values: &[u32]) -> std::io::Result<()> {
    /// `union bpf_attr`'s `batch` member.
    #[repr(C)]
    struct BatchAttr {
        in_batch: u64,
        out_batch: u64,
        keys: u64,
        values: u64,
        count: u32,
        map_fd: u32,
        elem_flags: u64,
        flags: u64,
    }
    const BPF_MAP_UPDATE_BATCH: libc::c_long = 26;
    assert_eq!(keys.len(), values.len());
    if keys.is_empty() {
        return Ok(());
    }
    let mut attr = BatchAttr {
        in_batch: 0,
        out_batch: 0,
        keys: keys.as_ptr() as u64,
        values: values.as_ptr() as u64,
        count: keys.len() as u32,
        map_fd: fd,
        elem_flags: 0,
        flags: 0,
    };
    // SAFETY: the attribute points at `keys` and `values`, both alive for the call and
    // `count` long; the kernel reads them and writes only `count` back.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_UPDATE_BATCH,
            &mut attr as *mut BatchAttr,
            size_of::<BatchAttr>() as u32,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    if attr.count as usize != keys.len() {
        return Err(std::io::Error::other(format!(
            "{} of {} entries written",
            attr.count,
            keys.len()
        )));
    }
    Ok(())
}

/// The 4-byte value at `key` of the map `fd` (a map of maps gives its inner map's id).
pub(super) fn lookup_u32(fd: u32, key: u32) -> std::io::Result<u32> {
    /// `union bpf_attr`'s element member.
    #[repr(C)]
    struct ElemAttr {
        map_fd: u32,
        pad: u32,
        key: u64,
        value: u64,
        flags: u64,
    }
    const BPF_MAP_LOOKUP_ELEM: libc::c_long = 1;
    let mut value = 0u32;
    let attr = ElemAttr {
        map_fd: fd,
        pad: 0,
        key: &key as *const u32 as u64,
        value: &mut value as *mut u32 as u64,
        flags: 0,
    };
    // SAFETY: the attribute points at `key` and `value`, both alive for the call and
    // 4 bytes, the map's key and value sizes.
    let r = unsafe {
        libc::syscall(
            libc::SYS_bpf,
            BPF_MAP_LOOKUP_ELEM,
            &attr as *const ElemAttr,
            size_of::<ElemAttr>() as u32,
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(value)
}
