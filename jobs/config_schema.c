/* The configuration schema table (SPEC §4, STYLE B10): one row per YAML key with its type,
 * default, range, required-for jobs, help, example and struct offset, and the groups of
 * docs/CONFIG.md (the lookups on them: config_lookup.c). Everything else about keys is derived
 * from the table: defaults, parsing, range checks and --set (config_parse.c), `validate` output
 * (config_format.c), docs/CONFIG.md (config_doc.c). Invariant: every field of struct sm_job_config
 * except source_path and effective has a row, and the rows of one group are contiguous
 * (tests/unit/jobs/ test_config_schema.c checks both). */
#include <shardmill/sm_config.h>

#include "config_schema.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define TIB (UINT64_C(1) << 40)
#define SIZE_CAP (1024 * TIB) /* upper bound of byte sizes: keeps products of sizes in range */

#define FIELD(m)                                                                                   \
    .off = offsetof(struct sm_job_config, m), .size = sizeof(((struct sm_job_config *)0)->m)

#define DTYPES "bool|int8|int16|int32|int64|uint8|uint16|uint32|uint64|float32|float64"
#define CONVERT_INGEST (SM_CFG_JOB(SM_JOB_CONVERT) | SM_CFG_JOB(SM_JOB_INGEST))
/* The jobs that walk the ROI in tiles on threads and count a histogram: all but read-bench, which
 * times single region reads in one thread (its report has no tile and no histogram). */
#define TILE_JOBS (SM_CFG_JOB(SM_JOB_SCAN) | CONVERT_INGEST)

/* ---- the table ---- */

const struct sm_cfg_key sm_cfg_keys[] = {
    {.path = "job",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_ENUM,
     .choices = "scan|convert|ingest|read-bench",
     .required = SM_CFG_ALL_JOBS,
     .help = "the job to run (SPEC §4): scan, convert, ingest or read-bench",
     .example = "convert",
     FIELD(job)},

    {.path = "input.store",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_STRING,
     .path_class = SM_PATHC_INPUT,
     .path_noun = "input",
     .flags = SM_CFGF_NONEMPTY,
     .required = SM_CFG_ALL_JOBS,
     .help = "the input: a Zarr or N5 store path, file://, http(s):// or s3://bucket/prefix URL "
             "(convert and ingest: also a local file, or a directory of slices, of a source "
             "input.format names)",
     .example = "http://127.0.0.1:8080/ct.zarr",
     FIELD(input.store)},
    {.path = "input.array",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_STRING,
     .path_class = SM_PATHC_NONE,
     .def = "\"\"",
     .def_doc = "the store's root node",
     .help = "path of the array inside a group, e.g. an OME-Zarr level",
     .example = "\"0\"",
     FIELD(input.array)},
    {.path = "input.spacing",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_FLOATS,
     .flags = SM_CFGF_NULLABLE | SM_CFGF_POSITIVE,
     .def_doc = "from the input (an OME-Zarr image's level scale, or what a source's file "
                "states: its header, ImageJ or OME-XML metadata, resolution tags), else 1 per axis",
     .help = "voxel size per axis in z, y, x order (SPEC §2): the output's OME `scale` "
             "(x the level's factor per axis at level k), its provenance and the HDF5 export's "
             "attributes",
     .example = "[1.5, 0.957, 0.957]",
     FIELD(input.spacing)},
    {.path = "input.unit",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_STRING,
     .path_class = SM_PATHC_NONE,
     .flags = SM_CFGF_NULLABLE | SM_CFGF_NONEMPTY | SM_CFGF_SPACE_UNIT,
     .def_doc = "from the input (OME-Zarr axes, or what a source's file states: its header's "
                "units, ImageJ or OME-XML metadata, resolution tags), else none",
     .help = "unit of input.spacing, a UDUNITS-2 space unit as OME-Zarr wants (millimeter, "
             "micrometer, ...; `um` or `micron` are refused: micrometer)",
     .example = "millimeter",
     FIELD(input.unit)},
    {.path = "input.origin",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_FLOATS,
     .flags = SM_CFGF_NULLABLE,
     .def_doc = "from the input (an OME-Zarr translation, NIfTI sform/qform), else none",
     .help = "position of voxel 0 in z, y, x order, in input.unit: the OME `translation`",
     .example = "[0, -120.5, -98]",
     FIELD(input.origin)},
    {.path = "input.cache.enabled",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_BOOL,
     .def = "true",
     .help = "keep fetched encoded objects in a byte-capped LRU cache (SPEC §3); on by "
             "default; skipped when no input object can be read twice (the report's "
             "io.cache.why)",
     .example = "false",
     FIELD(input.cache_enabled)},
    {.path = "input.cache.max_bytes",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_SIZE,
     .def = "256MiB",
     .min = 1,
     .max = SIZE_CAP,
     .help = "byte cap of the encoded-object cache (at most half of limits.memory_bytes)",
     .example = "1GiB",
     FIELD(input.cache_max_bytes)},
    {.path = "input.index_cache.max_bytes",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_SIZE,
     .def = "16MiB",
     .def_doc = "0 disables the shard-index cache",
     .min = 0,
     .max = SIZE_CAP,
     .help = "byte cap of the shard-index cache",
     .example = "64MiB",
     FIELD(input.index_cache_bytes)},
    {.path = "input.index_cache.max_entries",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_UINT,
     .def = "64",
     .def_doc = "0 disables the shard-index cache",
     .min = 0,
     .max = 1u << 20,
     .help = "entry cap of the shard-index cache",
     .example = "256",
     FIELD(input.index_cache_entries)},
    {.path = "input.http.connect_timeout_ms",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_INT,
     .def = "10000",
     .min = 1,
     .max = 600000,
     .help = "TCP and TLS connect timeout, in milliseconds",
     .example = "2000",
     FIELD(input.http.connect_timeout_ms)},
    {.path = "input.http.low_speed_bytes",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_INT,
     .def = "1024",
     .def_doc = "0 never aborts a slow transfer",
     .min = 0,
     .max = 1u << 30,
     .help = "a transfer slower than this many bytes/s for low_speed_time_s is aborted and "
             "retried",
     .example = "4096",
     FIELD(input.http.low_speed_bytes)},
    {.path = "input.http.low_speed_time_s",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_INT,
     .def = "20",
     .min = 0,
     .max = 86400,
     .help = "seconds below low_speed_bytes before a transfer is aborted and retried",
     .example = "60",
     FIELD(input.http.low_speed_time_s)},
    {.path = "input.http.request_timeout_ms",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_INT,
     .def = "300000",
     .def_doc = "0: no deadline",
     .min = 0,
     .max = 86400000,
     .help = "deadline of one request attempt, connect to last byte, in milliseconds: a slower "
             "one is aborted and retried (a server trickling above low_speed_bytes cannot hold "
             "a run)",
     .example = "60000",
     FIELD(input.http.request_timeout_ms)},
    {.path = "input.http.retries",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_UINT,
     .def = "4",
     .min = 0,
     .max = 100,
     .help = "further attempts after the first, on 5xx, 429, a reset or a truncated body",
     .example = "8",
     FIELD(input.http.max_retries)},
    {.path = "input.http.backoff_base_ms",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_UINT,
     .def = "100",
     .min = 0,
     .max = 600000,
     .help = "delay before the first retry, in milliseconds; doubles with every retry",
     .example = "250",
     FIELD(input.http.backoff_base_ms)},
    {.path = "input.http.backoff_max_ms",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_UINT,
     .def = "5000",
     .min = 0,
     .max = 3600000,
     .help = "cap of the retry delay, in milliseconds (at least backoff_base_ms)",
     .example = "10000",
     FIELD(input.http.backoff_max_ms)},
    {.path = "input.http.verify_tls",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_BOOL,
     .def = "true",
     .help = "verify the TLS peer certificate and host name",
     .example = "true",
     FIELD(input.http.verify_tls)},
    {.path = "input.s3.endpoint",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_STRING,
     .path_class = SM_PATHC_NONE,
     .flags = SM_CFGF_NULLABLE | SM_CFGF_NONEMPTY,
     .def_doc =
         "AWS_ENDPOINT_URL_S3, else AWS_ENDPOINT_URL, else https://s3.<region>.amazonaws.com",
     .help = "s3:// inputs: the http:// or https:// URL of the S3 service (a local server, MinIO, "
             "another cloud)",
     .example = "http://127.0.0.1:9000",
     FIELD(input.s3_endpoint)},
    {.path = "input.s3.region",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_STRING,
     .path_class = SM_PATHC_NONE,
     .flags = SM_CFGF_NULLABLE | SM_CFGF_NONEMPTY,
     .def_doc = "AWS_REGION, else AWS_DEFAULT_REGION, else the profile's region, else us-east-1",
     .help = "s3:// inputs: the region requests are signed for (AWS SigV4); credentials come "
             "only from AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY / AWS_SESSION_TOKEN or the "
             "AWS_PROFILE profile of ~/.aws/credentials, never from this file",
     .example = "eu-central-1",
     FIELD(input.s3_region)},
    {.path = "input.s3.path_style",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_BOOL,
     .def = "false",
     .def_doc = "false: <bucket>.<endpoint host>; an IP address or localhost endpoint is always "
                "path-style",
     .help = "s3:// inputs: address objects as <endpoint>/<bucket>/<key> (path-style)",
     .example = "true",
     FIELD(input.s3_path_style)},
    {.path = "input.format",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_NAME,
     .from = SM_CFG_FROM_FORMAT, /* choices, help and def_doc: the source registry */
     .flags = SM_CFGF_NULLABLE,
     .example = "nifti",
     FIELD(input.format)},
    {.path = "input.raw.dtype",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_NAME,
     .choices = DTYPES,
     .flags = SM_CFGF_NULLABLE,
     .def_doc = "required to ingest raw input",
     .help = "element type of a raw volume (a Zarr v3 data type name)",
     .example = "int16",
     FIELD(input.raw_dtype)},
    {.path = "input.raw.shape",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_DIMS,
     .flags = SM_CFGF_NULLABLE | SM_CFGF_NONEMPTY | SM_CFGF_POSITIVE,
     .def_doc = "required to ingest raw input",
     .help = "shape of a raw volume, slowest axis first: [z, y, x]",
     .example = "[108, 256, 256]",
     FIELD(input.raw_shape)},
    {.path = "input.raw.byte_order",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_NAME,
     .choices = "little|big",
     .def = "little",
     .help = "byte order of a raw volume",
     .example = "big",
     FIELD(input.raw_byte_order)},
    {.path = "input.raw.header_bytes",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_SIZE,
     .def = "0",
     .min = 0,
     .max = TIB,
     .help = "bytes to skip at the start of a raw file",
     .example = "352",
     FIELD(input.raw_header_bytes)},
    {.path = "input.hdf5.dataset",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_STRING,
     .path_class = SM_PATHC_NONE,
     .flags = SM_CFGF_NULLABLE | SM_CFGF_NONEMPTY,
     .def_doc = "required to read hdf5 input",
     .help = "absolute HDF5 path of the dataset to ingest (any chunking and filter the HDF5 "
             "library reads; integers of 1, 2, 4, 8 bytes, float32, float64)",
     .example = "/exchange/data",
     FIELD(input.hdf5_dataset)},
    {.path = "input.hdf5.allow_external",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_BOOL,
     .def = "false",
     .def_doc = "false: data outside the input file is exit 3 naming it",
     .help = "follow external links and read external storage and virtual datasets whose data "
             "lies in files other than the HDF5 input (external storage is found relative to the "
             "input's directory)",
     .example = "true",
     FIELD(input.hdf5_allow_external)},
    {.path = "input.direct_io",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_ENUM,
     .choices = "auto|always|never", /* enum sm_source_direct's order */
     .def = "auto",
     .help = "read an uncompressed TIFF's runs of 128 KiB or more with O_DIRECT, past the page "
             "cache, where copying them through the cache costs CPU the codecs need (buffered "
             "where the file system refuses O_DIRECT; docs/internals/reading.md): auto = when "
             "the input's files hold at least half of the machine's memory (the cache could not "
             "keep them between passes), always, never",
     .example = "never",
     FIELD(input.direct_io)},

    {.path = "roi.offset",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_DIMS,
     .flags = SM_CFGF_NULLABLE | SM_CFGF_NONEMPTY,
     .def_doc = "zeros",
     .help = "first voxel of the region of interest, one index per axis",
     .example = "[1, 2, 3]",
     FIELD(roi.offset)},
    {.path = "roi.shape",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_DIMS,
     .flags = SM_CFGF_NULLABLE | SM_CFGF_NONEMPTY | SM_CFGF_POSITIVE,
     .def_doc = "to the end of the array",
     .help = "extent of the region of interest, one length per axis",
     .example = "[128, 128, 128]",
     FIELD(roi.shape)},

    {.path = "tile",
     .applies = TILE_JOBS,
     .type = SM_CFG_DIMS,
     .flags = SM_CFGF_NULLABLE | SM_CFGF_NONEMPTY | SM_CFGF_POSITIVE,
     .def_doc = "the input's chunk shape",
     .help = "shape of the tiles the ROI is traversed in (the unit of thread work)",
     .example = "[8, 32, 32]",
     FIELD(tile)},
    {.path = "passes",
     .applies = SM_CFG_JOB(SM_JOB_SCAN),
     .type = SM_CFG_UINT,
     .def = "1",
     .min = 1,
     .max = 1000000,
     .help = "traverse the ROI this many times (scan only; every pass must agree)",
     .example = "8",
     FIELD(passes)},

    {.path = "read_bench.extents",
     .applies = SM_CFG_JOB(SM_JOB_READ_BENCH),
     .type = SM_CFG_DIMS,
     .flags = SM_CFGF_NULLABLE | SM_CFGF_NONEMPTY | SM_CFGF_POSITIVE,
     .def_doc = "one case: the ROI (roi.offset, roi.shape)",
     .help = "read-bench: one case per value, a region of that length along every axis starting "
             "at roi.offset (W3: [256, 1024, 2048] at roi.offset [7, 11]); excludes roi.shape",
     .example = "[256, 1024, 2048]",
     FIELD(read_bench.extents)},
    {.path = "read_bench.repeats",
     .applies = SM_CFG_JOB(SM_JOB_READ_BENCH),
     .type = SM_CFG_UINT,
     .def = "5",
     .min = 1,
     .max = 100000,
     .help = "read-bench: timed reads of each case's region (min, median and max are reported)",
     .example = "10",
     FIELD(read_bench.repeats)},
    {.path = "read_bench.warmup",
     .applies = SM_CFG_JOB(SM_JOB_READ_BENCH),
     .type = SM_CFG_UINT,
     .def = "1",
     .min = 0,
     .max = 1000,
     .help = "read-bench: untimed reads of each case's region before the timed ones (they fill "
             "the caches; their requests are counted)",
     .example = "0",
     FIELD(read_bench.warmup)},

    {.path = "histogram.bins",
     .applies = TILE_JOBS,
     .type = SM_CFG_UINT,
     .def = "0",
     .def_doc = "0 takes the default of SPEC §5: 256 for uint8, one bin per value for int8, "
                "int16 and uint16, 65536 over the min/max pass's range for wider types and floats",
     .min = 0,
     .max = 1u << 24,
     .help = "number of histogram bins",
     .example = "256",
     FIELD(histogram.bins)},
    {.path = "histogram.range",
     .applies = TILE_JOBS,
     .type = SM_CFG_RANGE,
     .flags = SM_CFGF_NULLABLE,
     .def_doc = "the type range of SPEC §5 (8/16-bit); wider integers and floats: [min, max] "
                "of the finite values, found by a first pass over the ROI (max in the last bin; "
                "NaN and +-inf counted apart)",
     .help = "[lo, hi): the interval the bins divide evenly",
     .example = "[0, 256]",
     .off = offsetof(struct sm_job_config, histogram.lo),
     .size = sizeof(double),
     .off2 = offsetof(struct sm_job_config, histogram.hi),
     .off_set = offsetof(struct sm_job_config, histogram.range_set)},

    {.path = "normalize.mode",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_ENUM,
     .from = SM_CFG_FROM_MODE, /* choices and help: the modes' descriptors */
     .def = "scale",
     .def_doc = "scale (ingest: none, the only mode it takes)",
     .example = "percentile",
     FIELD(normalize.mode)},
    {.path = "normalize.divisor",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_FLOAT,
     .def = "255",
     .flags = SM_CFGF_NONZERO,
     .help = "the divisor of scale mode",
     .example = "4095",
     FIELD(normalize.divisor)},
    {.path = "normalize.lo",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_FLOAT,
     .from = SM_CFG_FROM_MODE_KEY,
     .help = "window: the value mapped to 0; percentile: a percentile in 0..100",
     .example = "1",
     FIELD(normalize.lo)},
    {.path = "normalize.hi",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_FLOAT,
     .from = SM_CFG_FROM_MODE_KEY,
     .help = "window: the value mapped to 1; percentile: a percentile in 0..100, above lo",
     .example = "99",
     FIELD(normalize.hi)},

    {.path = "output.path",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_STRING,
     .path_class = SM_PATHC_OUTPUT,
     .path_noun = "output",
     .flags = SM_CFGF_NULLABLE | SM_CFGF_NONEMPTY,
     .required = CONVERT_INGEST,
     .help = "the output Zarr v3 array, a local directory (never written outside it); a path "
             "with a `..` component is refused, and the last component must be a name of its "
             "own; it may not be the input, lie inside it or contain it, compared after resolving "
             "links (exit 2 before anything is created or deleted; `validate` checks it too)",
     .example = "out/ct.zarr",
     FIELD(output.path)},
    {.path = "output.shard",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_DIMS,
     .flags = SM_CFGF_POSITIVE | SM_CFGF_AUTO,
     .def = "auto",
     .def_doc =
         "auto: the inner chunk times powers of two, so that a shard holds 32-64 MiB of "
         "output values (one shard when the output is smaller), made shallower on axis 0 "
         "until a group of shards that share input read blocks (a strip of an image "
         "file, a chunk) fits half of limits.memory_bytes, so each input byte is read once per "
         "pass (docs/internals/reading.md); [] writes an unsharded array",
     .help = "shard shape of the output (SPEC §2 default layout: a volume of N bytes makes about "
             "N / 32 MiB shards; `plan` and `validate` print the layout)",
     .example = "[16, 64, 64]",
     FIELD(output.shard)},
    {.path = "output.chunk",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_DIMS,
     .flags = SM_CFGF_NONEMPTY | SM_CFGF_POSITIVE | SM_CFGF_AUTO,
     .def = "auto",
     .def_doc = "auto: 64 voxels per axis, clipped to the output (with an explicit output.shard: "
                "64 where it divides the shard's extent, else the shard's extent); an OME-Zarr "
                "0.5 image's 3-D levels: 4 planes deep (a divisor of the shard's depth), y and x "
                "square powers of two, 64 doubled up to 128 KiB of values within the shard "
                "(uint16: [4, 128, 128]) and halved while the chunks would span more than 4/3 "
                "of the level's y or x; an OME-Zarr 0.4 image's: 4 planes, y and x the largest "
                "power of two up to 512 within the level spanning at most 4/3 of it (the CT: "
                "[4, 256, 256]); so a viewer fetches at most 8x the bytes of an xy plane it "
                "shows and 2x those of a level (docs/VIEWING.md); an explicit output.chunk is "
                "used as given",
     .help = "inner chunk shape of every shard (the chunk shape when unsharded); divides "
             "output.shard",
     .example = "[4, 32, 32]",
     FIELD(output.chunk)},
    {.path = "output.codec.name",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_NAME,
     .from = SM_CFG_FROM_CODEC, /* choices and help: the codecs with writer slots */
     .def = "zstd",
     .example = "gzip",
     FIELD(output.codec)},
    {.path = "output.codec.level",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_INT,
     .def = "3",
     .min = -131072, /* the union of the writers' ranges (test_config_schema.c checks it) */
     .max = 22,
     .from = SM_CFG_FROM_LEVEL, /* help: each writer's range */
     .example = "5",
     FIELD(output.codec_level)},
    {.path = "output.dtype",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_NAME,
     .choices = DTYPES,
     .flags = SM_CFGF_NULLABLE,
     .def_doc = "float32; convert with normalize.mode none and ingest: the input's type",
     .help = "data type of the output array (convert: float32, uint8 or uint16, the integers "
             "out = rint(float32(w) * float32(MAX)) in float32, half to even, clamped to "
             "[0, MAX] (MAX 255 or 65535, w the float32 normalized value, NaN -> 0); with "
             "normalize.mode none the "
             "input's type or a type that holds every value of it: a wider integer, float32 for "
             "8/16-bit integers, float64 for integers up to 32 bits or float32; ingest: the "
             "input's type, float32 for a NIfTI file whose scl_slope/scl_inter are applied)",
     .example = "float32",
     FIELD(output.dtype)},
    {.path = "output.exists",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_ENUM,
     .choices = "error|overwrite|resume|auto",
     .def = "error",
     .def_doc = "interactive runs; slurm/render writes auto into batch scripts",
     .help = "when the output exists: refuse (exit 2), replace it, or rewrite only the shards "
             "that are missing or damaged (SPEC §6). `resume` reads the whole input again and "
             "keeps a shard only when its file matches its record and the values computed for "
             "it have the recorded digest, so a shard whose input changed is rewritten; a "
             "changed configuration or input (its resolved path or store, its metadata) is "
             "refused with exit 2 naming what differs. `auto` (for batch "
             "scripts and requeued jobs): no "
             "output or an empty directory is written, this job's unfinished output (the same "
             "configuration and input: zarr.json's provenance config_sha256, input and engine; "
             "the input by its resolved path) is resumed, this job's complete output that "
             "verifies and whose input's state is the same (the device, inode, size, ctime and "
             "mtime of every file read, which touch -d cannot set back) is left alone (exit 0, "
             "\"nothing to do\"; one whose shards do not verify, whose input changed, or whose "
             "HTTP input has no marker binding its values, is resumed), anything else is refused "
             "with exit 2 naming the first difference. A second run on an output another run "
             "holds is refused with exit 2 naming the holder "
             "(docs/internals/writing.md)",
     .example = "resume",
     FIELD(output.exists)},
    {.path = "output.fsync",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_BOOL,
     .def = "true",
     .help = "make every shard and directory durable before the completion marker (SPEC §6); "
             "false only for tests and benchmark baselines",
     .example = "false",
     FIELD(output.fsync)},
    {.path = "output.sync",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_ENUM,
     .choices = "fsync|syncfs", /* enum sm_output_sync's order */
     .def = "syncfs",
     .help = "how output.fsync makes shards durable: syncfs = shards staged under temporary "
             "names, one syncfs, all renamed, a second syncfs; fsync = each shard fsynced before "
             "its rename and each directory after (same guarantee, one fsync per file)",
     .example = "fsync",
     FIELD(output.sync)},
    {.path = "output.direct_io",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_ENUM,
     .choices = "auto|always|never", /* enum sm_output_direct's order */
     .def = "auto",
     .help = "write each shard of 1 MiB or more with O_DIRECT, past the page cache, all but its "
             "last partial 4 KiB block, except the levels the run reads back (buffered where the "
             "file system refuses O_DIRECT; the durability of output.fsync is the same; "
             "docs/internals/writing.md): auto = when the output's values hold at least half of "
             "the machine's memory, always, never",
     .example = "never",
     FIELD(output.direct_io)},
    {.path = "output.ome.levels",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_UINT,
     .flags = SM_CFGF_AUTO,
     .def = "auto",
     .def_doc = "auto (stored as 0): down to the first level whose largest axis is <= 256 voxels; "
                "giving this key (or output.ome.method) makes the output an OME-Zarr image",
     .min = 1,
     .max = 32,
     .help = "OME-Zarr image output (SPEC §2; 0.5, or 0.4 with output.ome.version): the arrays "
             "0 .. levels-1 of a multiscale "
             "pyramid, level k+1 made from blocks of level k (output.ome.method) with some axes "
             "halved (output.ome.downsample)",
     .example = "4",
     FIELD(output.ome_levels)},
    {.path = "output.ome.method",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_NAME,
     .choices = "mean|nearest",
     .flags = SM_CFGF_NULLABLE,
     .def_doc = "mean when output.ome.levels, output.ome.downsample or output.ome.version is "
                "given; otherwise no OME-Zarr image (a plain array)",
     .help = "how a level is made from the block of the level above it (2 voxels on each axis "
             "halved, 1 on the others): mean = float64 sum of the block's float32 values in C "
             "order, divided by the count, rounded once (SPEC §2); nearest = the block's first "
             "value in C order (labels and masks: no value is invented)",
     .example = "nearest",
     FIELD(output.ome_method)},
    {.path = "output.ome.downsample",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_ENUM,
     .choices = "auto|all|yx",
     .def = "auto",
     .help = "which axes each level halves: auto = those whose spacing is below 3/4 of the "
             "level's largest spacing (every axis when none is; an axis of one voxel is kept), "
             "so an anisotropic volume becomes near-isotropic before z is halved; all = every "
             "axis at every level; yx = y and x only, never z (for the viewers that need every "
             "level to keep z: Viv, Avivator, vizarr); with yx, levels: auto and the most "
             "levels count y and x alone",
     .example = "all",
     FIELD(output.ome_downsample)},
    {.path = "output.ome.version",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_ENUM,
     .choices = "0.5|0.4",
     .def = "\"0.5\"",
     .help = "the OME-NGFF version of the image: 0.5 = Zarr v3 arrays, sharded; 0.4 = Zarr v2 "
             "arrays (.zgroup, .zattrs with multiscales 0.4 and omero, .zarray with "
             "dimension_separator \"/\", C order), one file per chunk, no shards (output.shard "
             "refused), for the tools that read no Zarr v3 (Bio-Formats, QuPath, OMERO, MoBIE, "
             "ilastik); automatic chunks of 4 planes of 512 x 512 voxels, clipped to the "
             "level (1-4 MiB files; see output.chunk); output.codec defaults to blosc lz4 level 5 "
             "with byte shuffle "
             "(as bioformats2raw writes it); the values are those of 0.5",
     .example = "\"0.4\"",
     FIELD(output.ome_version)},

    {.path = "export.hdf5.path",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_STRING,
     .path_class = SM_PATHC_OUTPUT,
     .path_noun = "export",
     .flags = SM_CFGF_NULLABLE | SM_CFGF_NONEMPTY,
     .def_doc = "no HDF5 export",
     .help = "also write the output's values as one chunked HDF5 dataset of the output's type "
             "(float32, uint8 or uint16; parallel HDF5 "
             "under MPI), with the histogram and provenance (convert); its directory must exist "
             "or be one that output.path creates; it may not be, lie inside or contain the input "
             "or output.path (links resolved; exit 2 before anything is created)",
     .example = "out/ct.h5",
     FIELD(export_.hdf5_path)},
    {.path = "export.hdf5.dataset",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_STRING,
     .path_class = SM_PATHC_NONE,
     .flags = SM_CFGF_NONEMPTY,
     .def = "\"/data\"",
     .help = "absolute HDF5 path of the dataset (missing groups are created); the histogram goes "
             "to /histogram",
     .example = "/ct/volume",
     FIELD(export_.hdf5_dataset)},
    {.path = "export.hdf5.chunk",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_DIMS,
     .flags = SM_CFGF_NULLABLE | SM_CFGF_NONEMPTY | SM_CFGF_POSITIVE,
     .def_doc = "the output's shard shape (output.chunk when unsharded), clipped to the array",
     .help = "HDF5 chunk shape of the dataset",
     .example = "[16, 64, 64]",
     FIELD(export_.hdf5_chunk)},
    {.path = "export.hdf5.deflate",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_INT,
     .def = "0",
     .def_doc = "0 writes the chunks uncompressed",
     .min = 0,
     .max = 9,
     .help = "deflate (gzip) level of the HDF5 chunks",
     .example = "4",
     FIELD(export_.hdf5_deflate)},
    {.path = "export.hdf5.exists",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_ENUM,
     .choices = "error|overwrite",
     .def = "error",
     .help = "when the export path exists: refuse (exit 2) or replace an HDF5 file there "
             "(atomically, once the new file is complete; anything else is refused)",
     .example = "overwrite",
     FIELD(export_.hdf5_exists)},
    {.path = "export.hdf5.collective_timeout_s",
     .applies = CONVERT_INGEST,
     .type = SM_CFG_UINT,
     .def = "60",
     .min = 1,
     .max = 86400,
     .help = "under MPI: seconds a rank waits for the others right after a collective HDF5 call; "
             "past it, parallel HDF5 has left a rank blocked after a failure on another, and the "
             "job is aborted through MPI with the failure's exit status",
     .example = "300",
     FIELD(export_.hdf5_timeout_s)},

    {.path = "parallel.threads",
     .applies = TILE_JOBS,
     .type = SM_CFG_UINT,
     .flags = SM_CFGF_AUTO,
     .def = "auto",
     .def_doc = "stored as 0: OMP_NUM_THREADS, else the number of cores",
     .min = 1,
     .max = 65536,
     .help = "OpenMP threads per rank",
     .example = "8",
     FIELD(parallel.threads)},
    {.path = "parallel.partition",
     .applies = TILE_JOBS,
     .type = SM_CFG_ENUM,
     .choices = "block|balanced", /* enum sm_part_kind's order */
     .def = "balanced",
     .help = "how the tiles and the shard grid are split across ranks, each rank getting one "
             "contiguous run: balanced = equal costs (the decoded input bytes each box touches), "
             "block = equal counts (docs/internals/ranks.md)",
     .example = "block",
     FIELD(parallel.partition)},

    {.path = "limits.memory_bytes",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_SIZE,
     .def = "2GiB",
     .min = 1,
     .max = SIZE_CAP,
     .help = "the ceiling of each rank's peak RSS as a whole process (the binary and its "
             "libraries, caches, windows, kept input, the threads' buffers; SPEC §1): before a "
             "convert writes anything, the bound `plan` prints is checked against it and, when "
             "over, the run adapts (re-reads its input instead of keeping it, then runs fewer "
             "threads, so fewer shards in flight) or stops with exit 5 naming the bound and its "
             "parts; within it, decoded input is kept for the write pass only when it fits in "
             "half of it, the encoded-object cache gets at most half; ingest of a .nii.gz: the "
             "inflated z slabs of the rank's shards must fit in it (more ranks each hold less); "
             "the output's per-shard records and an HDF5 input's chunk buffers (3 chunks a read; "
             "the reads in flight hold at most half of it) must fit too, or the run stops "
             "before any output with exit 5 naming the limit",
     .example = "8GiB",
     FIELD(limits.memory_bytes)},
    {.path = "limits.memory_ceiling",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_BOOL,
     .def = "true",
     .help = "check a convert's bound of a rank's peak RSS against limits.memory_bytes before "
             "it starts (adapt, or exit 5); false: limits.memory_bytes only sizes the engine's "
             "buffers (kept input, windows, caches), e.g. a tiny budget that forces re-reads in "
             "a test",
     .example = "false",
     FIELD(limits.memory_ceiling)},
    {.path = "limits.max_object_bytes",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_SIZE,
     .def = "512MiB",
     .min = 1,
     .max = SIZE_CAP,
     .help = "largest encoded object (chunk, shard part, metadata) fetched; a larger one is "
             "exit 5",
     .example = "64MiB",
     FIELD(limits.max_object_bytes)},
    {.path = "limits.max_chunk_bytes",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_SIZE,
     .def = "1GiB",
     .min = 1,
     .max = SIZE_CAP,
     .help = "largest decoded chunk, and the most a codec may decode where the metadata does "
             "not fix the size (a compressor's header after another compressor), and an "
             "HDF5 input's chunk (its values), checked before allocating; a larger one is exit "
             "5",
     .example = "256MiB",
     FIELD(limits.max_chunk_bytes)},
    {.path = "limits.max_requests",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_UINT,
     .def = "1000000",
     .min = 1,
     .max = TIB,
     .help = "requests a rank may send to its input store, as the report's io.requests counts "
             "them (every HTTP attempt, retries included; read-bench: per case); the one past "
             "it is refused before it is sent, exit 5",
     .example = "50000",
     FIELD(limits.max_requests)},

    {.path = "report",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_STRING,
     .path_class = SM_PATHC_REPORT,
     .path_noun = "report",
     .flags = SM_CFGF_NULLABLE | SM_CFGF_NONEMPTY,
     .def_doc = "no report file: standard output gets the short summary alone",
     .help = "path of the JSON report written by rank 0 (SPEC §7; `shardmill run --report PATH` "
             "overrides it, `-` is standard output); standard output always gets a short summary "
             "(job, voxels, checksums, window, output, times, figure of merit) unless the JSON "
             "goes there; checked before the job starts: not a directory, no ancestor a file, "
             "writable (missing directories are made when the report is written), and not the "
             "input nor inside it or the output (SPEC §6.7)",
     .example = "report.json",
     FIELD(report)},
    {.path = "progress",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_BOOL,
     .def = "true",
     .help = "progress on stderr from rank 0 (shards or tiles done / total, MB/s, ETA; "
             "`shardmill run --quiet` turns it off)",
     .example = "false",
     FIELD(progress)},
    {.path = "progress_interval",
     .applies = SM_CFG_ALL_JOBS,
     .type = SM_CFG_UINT,
     .def = "10",
     .min = 0,
     .max = 86400,
     .help = "seconds between progress lines when stderr is not a terminal (Slurm logs); a "
             "phase shorter than this prints none; a terminal gets a live line after 1 s; 0 "
             "shows every item",
     .example = "60",
     FIELD(progress_interval)},
};

const unsigned sm_cfg_nkeys = sizeof(sm_cfg_keys) / sizeof(sm_cfg_keys[0]);

const struct sm_cfg_group sm_cfg_groups[] = {
    {"job", "What to run."},
    {"input",
     "Where the volume comes from: the store and array, the encoded-object and "
     "shard-index caches, HTTP behaviour, and the sources (`input.format`) of `convert` and "
     "`ingest`."},
    {"roi", "The region of interest; by default the whole array."},
    {"tile", "How the ROI is cut into units of work."},
    {"passes", "Repetitions of a `scan` (benchmarks, cache checks)."},
    {"read_bench", "The cases of `read-bench` (SPEC §8 W3): timed region reads "
                   "(`sm_array_read_region`), each case on a freshly opened array, so its caches "
                   "start cold and its counters are its own. The caches are `input.cache` and "
                   "`input.index_cache`."},
    {"histogram",
     "The intensity histogram scan, convert and ingest compute (SPEC §5): B bins over [lo, hi), "
     "bin = floor((v - lo) * B / (hi - lo)) in double (B - 1 where rounding reaches B), v < lo "
     "underflow, v >= hi overflow, NaN apart. Without `histogram.range`: uint8 256 bins over "
     "[0, 256), int8, int16 and uint16 one bin per value; wider integers (as doubles: exact up "
     "to 2^53) and floats get a first pass over the ROI for the finite min and max, then "
     "`bins` (65,536) over [min, nextafter(max, +inf)), so max is in the last bin (min = max: "
     "every finite value in bin 0; no finite value: [0, 1)). +inf and -inf are counted apart "
     "and also sit in overflow and underflow, so a percentile's N counts them. The report gives "
     "min, max, `range_from` (config, type, minmax) and `timing_ms.range` for the extra read. "
     "`normalize.mode: none` of such a type without `histogram.*` keys makes no histogram (one "
     "read)."},
    {"normalize", "How `convert` maps voxels to float (SPEC §5); `ingest` is convert with mode "
                  "`none` and takes no other mode."},
    {"output", "The Zarr v3 array `convert` and `ingest` write (SPEC §2, §6)."},
    {"export", "Optional HDF5 copy of the output's values, written with parallel HDF5 after the "
               "Zarr shards and before the completion marker (SPEC §2, §6)."},
    {"parallel", "Threads per rank and the rank partition (ranks come from mpirun/srun)."},
    {"limits", "Resource limits; hitting one stops the job with exit 5."},
    {"report", "The JSON report (SPEC §7)."},
    {"progress", "Progress output."},
    {"progress_interval", "How often progress is printed."},
    {NULL, NULL},
};
