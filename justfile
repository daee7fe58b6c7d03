# Short aliases; the real work is in `cargo xtask` (see README).
default:
    @just --list

bootstrap:
    cargo xtask bootstrap

demo *ARGS:
    cargo xtask demo {{ARGS}}

test *ARGS:
    cargo xtask test {{ARGS}}

# netns golden tests only
test-netns:
    cargo test -p juneau-harness

# rewrite the golden pcaps from the current datapath (review the .txt diffs!)
update-goldens:
    UPDATE_GOLDEN=1 cargo test -p juneau-harness

lint:
    cargo xtask lint

# all benchmarks: bench/results.json and docs/benchmarks.md
bench:
    cargo xtask bench

# kind cluster with the real manifests (needs Docker, kind, kubectl; see kind/README.md)
e2e-kind:
    kind/e2e.sh
