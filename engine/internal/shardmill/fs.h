/* The one implementation of "write an object atomically" on a POSIX file system (SPEC §6):
 * a temporary name in the target's directory, written, optionally fsynced, renamed over the
 * target; directory fsync and syncfs to make the entries durable. Every path is relative to a
 * directory descriptor (AT_FDCWD for a plain path). The file store (store/store_file.c) builds
 * its stage / commit / abort / sync slots on these, and the HDF5 export (export/), which the
 * HDF5 library writes to a path, takes its shared temporary name, fsync, rename and directory
 * fsync from here too, so there is no second copy of the protocol.
 * Beneath a descriptor: a path relative to a real directory descriptor (not AT_FDCWD) is a path
 * inside a tree shardmill owns (the output): every call here resolves it one directory at a time
 * and never follows a symbolic link in any component (openat2 RESOLVE_BENEATH |
 * RESOLVE_NO_SYMLINKS where the kernel has it, else an openat O_NOFOLLOW walk), so a link planted
 * in the tree cannot redirect a create, rename, mkdir, unlink or fsync elsewhere; meeting one is
 * SM_E_IO naming the link. A plain path (AT_FDCWD) is the user's and resolves as usual.
 * Errors are SM_E_IO with errno as the cause and the path in `what`; the caller adds `where`. */
#ifndef SM_CORE_FS_H
#define SM_CORE_FS_H

#include <stdbool.h>
#include <stddef.h>

#include "shardmill/buf.h"
#include "shardmill/status.h"

/* The size from which sm_fs_stage starts an object's write-out at once (a shard, not a doc). */
#define SM_FS_EARLY_WRITEBACK ((size_t)1 << 20)
/* The size from which sm_fs_stage writes an object from a 4 KiB-aligned buffer with O_DIRECT. */
#define SM_FS_DIRECT_MIN ((size_t)1 << 20)
#define SM_FS_DIRECT_ALIGN ((size_t)4096)

/* mkdir of every missing directory of `rel` (like mkdir -p; "" is the directory itself). */
sm_status sm_fs_mkdirs(int dirfd, const char *rel, struct sm_err *err);
/* The temporary name of a per-process staged object: "<key>.tmp.<pid>.<n>", a name no Zarr
 * key of a shardmill output can have. SM_E_INTERNAL if it does not fit in cap bytes. */
sm_status sm_fs_tmp_name(const char *key, unsigned n, char *buf, size_t cap, struct sm_err *err);
/* The temporary name of a file several processes write together (the same on every rank):
 * ".<name>.shardmill-tmp" in the same directory ("out/ct.h5" -> "out/.ct.h5.shardmill-tmp").
 * SM_E_USAGE naming path if it does not fit in cap bytes. */
sm_status sm_fs_shared_tmp_name(const char *path, char *buf, size_t cap, struct sm_err *err);
/* True if `name` is a per-process temporary name ("*.tmp.<...>", sm_fs_tmp_name). */
bool sm_fs_is_tmp(const char *name);
/* Creates `tmp` (exclusively, never through a link) with `data`, fsynced if `sync`. When the
 * parent directory of tmp is missing it is created (mkdir -p) and the create is retried once.
 * With `direct`, an object of SM_FS_DIRECT_MIN bytes or more whose bytes start at a
 * SM_FS_DIRECT_ALIGN boundary is written with O_DIRECT, all but its last partial block (written
 * buffered), so it bypasses the page cache (buffered wholly where the file system refuses).
 * Without `sync`, an object of SM_FS_EARLY_WRITEBACK bytes or more starts going to the disk now
 * (sm_fs_start_writeback), so a final syncfs waits only for the last ones. On failure nothing is
 * left behind. */
sm_status sm_fs_stage(int dirfd, const char *tmp, struct sm_bytes data, bool sync, bool direct,
                      struct sm_err *err);
/* Renames `tmp` over `key` (atomically replacing an existing object). The temporary file is left
 * in place on failure (the caller removes it or reports it). */
sm_status sm_fs_rename(int dirfd, const char *tmp, const char *key, struct sm_err *err);
/* fsync of the file or directory `rel` ("" = dirfd itself). */
sm_status sm_fs_fsync(int dirfd, const char *rel, struct sm_err *err);
/* openat(dirfd, rel, flags, mode) following no symbolic link in any component of rel (the last
 * one included, as O_NOFOLLOW): -1 with errno ELOOP when rel meets one, ENOTDIR where a component
 * is not a directory, ENOENT, EXDEV for a ".." component. `rel` "" is dirfd's directory. */
int sm_fs_open_beneath(int dirfd, const char *rel, int flags, unsigned mode);
/* The directory `rel` beneath dirfd, opened the same way (O_RDONLY | O_DIRECTORY); `create`:
 * missing directories are made first, one level at a time (mkdir -p). -1 with errno as above. */
int sm_fs_opendir_beneath(int dirfd, const char *rel, bool create);
/* unlinkat(dirfd, rel, flags) with rel's directories opened the same way (unlinkat never follows
 * the last component): -1 with errno ELOOP when a directory of rel is a link. */
int sm_fs_unlink_beneath(int dirfd, const char *rel, int flags);
/* An SM_E_IO "<what> '<rel>': <strerror>" with errno e as the cause; for ELOOP it names the
 * component of rel (beneath dirfd) that is a symbolic link instead. Returns SM_E_IO. */
sm_status sm_fs_fail(struct sm_err *err, const char *what, int dirfd, const char *rel, int e);
/* Tests only: false makes the calls above skip openat2 (the O_NOFOLLOW walk alone). */
void sm_fs_use_openat2(bool on);
/* openat2(2) with RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS (core_syncfs.c: a Linux call); -1 with
 * errno ENOSYS where the headers or the kernel lack it. */
int sm_fs_openat2_beneath(int dirfd, const char *rel, int flags, unsigned mode);
/* syncfs(2) of the file system holding fd (core_syncfs.c: Linux, _GNU_SOURCE). */
sm_status sm_fs_syncfs(int fd, struct sm_err *err);
/* Starts the write-out of fd's dirty pages without waiting (sync_file_range(2) with
 * SYNC_FILE_RANGE_WRITE; core_syncfs.c: Linux); a no-op where the call is missing or refused. It
 * is not durability: a later fsync or syncfs still waits for what it started. */
void sm_fs_start_writeback(int fd);
/* A second descriptor of the regular file open on fd, opened through /proc/self/fd with O_DIRECT
 * (core_syncfs.c: Linux, _GNU_SOURCE): its reads bypass the page cache and need offsets, lengths
 * and buffers aligned to the device's block. -1 with errno where the file system refuses O_DIRECT
 * (EINVAL), /proc is not mounted, or the file opened is not fd's (EXDEV); the caller reads fd. */
int sm_fs_reopen_direct(int fd);
/* The machine's physical memory in bytes (sysconf _SC_PHYS_PAGES; core_syncfs.c), 0 when unknown.
 */
uint64_t sm_fs_memory_bytes(void);
/* True when `bytes` are half of that memory or more, so the page cache could not keep them between
 * passes or runs: the `auto` rule of input.direct_io and output.direct_io. False when unknown. */
bool sm_fs_beyond_cache(uint64_t bytes);
/* Sets (on) or clears O_DIRECT on fd with fcntl(F_SETFL) (core_syncfs.c); false where the file
 * system refuses it (then fd is unchanged). */
bool sm_fs_set_direct(int fd, bool on);
/* The kind of a directory entry from readdir's d_type (core_syncfs.c: the DT_* names need
 * _GNU_SOURCE), so a walk of a large tree needs no stat per entry. SM_FS_UNKNOWN (file systems
 * that do not fill d_type): the caller stats the entry. */
enum sm_fs_kind { SM_FS_UNKNOWN, SM_FS_DIR, SM_FS_REG, SM_FS_OTHER };
enum sm_fs_kind sm_fs_dirent_kind(unsigned char d_type);

#endif
