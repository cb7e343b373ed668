#!/bin/bash
# Encrypted against --no-encryption, alternating, in one sitting: `send --synthetic
# 2GiB` to `recv --discard` on loopback, UDT and TCP, 1 and 4 channels, three rounds.
# Prints Gb/s, CPU-seconds per Gb at each end, and the handshake time.
# Build first: cargo build --release -p longhaul
set -euo pipefail
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
B="$(dirname "$0")/../target/release/longhaul"
$B token > "$TMP/tok"
run() {
  local extra=""; [ "$2" = clear ] && extra="--no-encryption"
  /usr/bin/time -f "%U %S" -o "$TMP/r.time" $B recv --discard --token-file "$TMP/tok" --listen 127.0.0.1:7071 $extra >/dev/null 2>"$TMP/r.err" &
  sleep 0.3
  /usr/bin/time -f "%U %S" -o "$TMP/s.time" $B send --token-file "$TMP/tok" $extra --transport $1 --channels $3 --synthetic 2GiB --json 127.0.0.1:7071 > "$TMP/s.json"
  wait
  TMP=$TMP python3 - "$1" "$2" "$3" <<'PY'
import json,os,sys
t=os.environ['TMP']
d=json.load(open(t+'/s.json'))
s=sum(map(float,open(t+'/s.time').read().split()))
r=sum(map(float,open(t+'/r.time').read().split()))
gb=d['bytes']*8/1e9
print(f"{sys.argv[1]} {sys.argv[2]:5} ch={sys.argv[3]} {d['bits_per_second']/1e9:.2f} Gb/s  send {s/gb:.3f} recv {r/gb:.3f} CPU-s/Gb  handshake {d['handshake_seconds']*1e3:.2f} ms")
PY
}
for round in 1 2 3; do
  for t in udt tcp; do for ch in 1 4; do for e in enc clear; do run $t $e $ch; done; done; done
done
