# The local cluster's S3 checkpoint store, sourced by scripts/cluster.sh
# (which sets root, dir, base, bin and the start/alive/wait_for/log helpers).
#
# CARAVAN_STORE=s3 starts one SeaweedFS server (`weed server -s3`, Apache-2.0,
# built by `make seaweedfs`) on 127.0.0.1 only, with its data under
# $dir/s3/data, and points both clients' driver plugins at it through a
# `store` block: the clients share no checkpoint directory. The server starts
# with an identities file (-s3.config), so it refuses anonymous and wrongly
# signed requests; `up` writes fresh random keys for it:
#
#   $dir/s3/admin.credentials    the admin identity (creates the bucket; tests)
#   $dir/s3/credentials          the clients' identity, limited to the bucket
#   $dir/s3/other-team.credentials  another team's, limited to the prefix
#                                other-team/ of the bucket (README's example)
#   $dir/s3/identities.json      the server's copy of both (-s3.config)
#
# all 0600, the credential files in the AWS shared-credentials format the
# driver's `store { credentials_file }` reads.
#
# Ports (loopback): S3 = base+16, master = base+13, volume = base+14,
# filer = base+15, and their gRPC ports base+6..base+9 (weed's default,
# port+10000, could land in another cluster's range).
#
# TEST ONLY: CARAVAN_S3_FAULT_PROXY=1 (with CARAVAN_STORE=s3, at `up`) puts
# a fault-injecting proxy (internal/s3fault, built into $dir/s3fault) between
# the clients and the server: the clients' store endpoint is then the proxy,
# 127.0.0.1:base+17, and tests switch faults on and off at runtime through
# its control endpoint, http://127.0.0.1:base+18 (POST /faults a JSON fault
# spec, DELETE /faults, GET /stats; see internal/s3fault/control.go and
# e2e/s3). With no fault set every request passes through unchanged; the
# control endpoint has no authentication, so both listen on loopback only.
# `make e2e-s3` sets it. `s3-stop` stops the server alone: the proxy stays
# and drops the clients' connections, as a stopped server would.

s3_dir=$dir/s3
s3_port=$((base + 16))
s3_endpoint=http://127.0.0.1:$s3_port
s3_bucket=caravan
s3_prefix=cluster-$base
s3_region=us-east-1
weed_bin=${CARAVAN_WEED:-$bin/seaweedfs}
s3_proxy_port=$((base + 17))
s3_control_port=$((base + 18))

# store_kind prints the checkpoint store this cluster runs with: posix or s3.
store_kind() {
  case "${CARAVAN_STORE:-posix}" in
    posix | s3) echo "${CARAVAN_STORE:-posix}" ;;
    *) echo "cluster: CARAVAN_STORE must be posix or s3, got '$CARAVAN_STORE'" >&2; exit 2 ;;
  esac
}

s3_enabled() { [[ $(store_kind) == s3 ]]; }

# s3_fault_proxy_asked says whether `up` was asked for the fault proxy;
# s3_fault_proxy_on whether this cluster runs with it (`up` records it).
s3_fault_proxy_asked() { [[ ${CARAVAN_S3_FAULT_PROXY:-0} == 1 ]] && s3_enabled; }

# check_s3_fault_proxy refuses a CARAVAN_S3_FAULT_PROXY other than 0 or 1.
check_s3_fault_proxy() {
  case "${CARAVAN_S3_FAULT_PROXY:-0}" in
    0 | 1) ;;
    *) echo "cluster: CARAVAN_S3_FAULT_PROXY must be 0 or 1, got '$CARAVAN_S3_FAULT_PROXY'" >&2; exit 2 ;;
  esac
}
s3_fault_proxy_on() { [[ -f $dir/s3-fault-proxy ]]; }

# s3_client_endpoint is the host:port the clients' store block names: the
# fault proxy's when it runs, else the server's.
s3_client_endpoint() {
  if s3_fault_proxy_on; then echo "127.0.0.1:$s3_proxy_port"; else echo "127.0.0.1:$s3_port"; fi
}

check_weed() {
  if [[ ! -x $weed_bin ]]; then
    echo "cluster: CARAVAN_STORE=s3 needs the SeaweedFS server at $weed_bin; run 'make seaweedfs' first" >&2
    exit 1
  fi
  # curl signs the script's own requests (bucket creation, readiness).
  if ! curl --help all 2>/dev/null | grep -q -- --aws-sigv4; then
    echo "cluster: CARAVAN_STORE=s3 needs curl 7.75 or later (--aws-sigv4)" >&2
    exit 1
  fi
}

# random_key N prints N random characters from [A-Za-z0-9].
random_key() {
  local k=""
  while (( ${#k} < $1 )); do
    k+=$(head -c 256 /dev/urandom | tr -dc 'A-Za-z0-9')
  done
  echo "${k:0:$1}"
}

# write_credentials FILE ACCESS SECRET writes an AWS shared-credentials file.
write_credentials() {
  (
    umask 077
    printf '[default]\naws_access_key_id = %s\naws_secret_access_key = %s\n' "$2" "$3" >"$1"
  )
  chmod 600 "$1"
}

# read_credential FILE KEY prints one value of a credentials file.
read_credential() {
  sed -n "s/^$2 *= *//p" "$1" | head -n 1
}

# write_s3_identities writes fresh random keys: the admin's, the clients'
# (Read, Write, List and Tagging on the bucket only) and the server's
# identities file.
write_s3_identities() {
  mkdir -p "$s3_dir"
  chmod 700 "$s3_dir"
  local aa as ca cs oa os
  aa=$(random_key 20) as=$(random_key 40) ca=$(random_key 20) cs=$(random_key 40)
  oa=$(random_key 20) os=$(random_key 40)
  write_credentials "$s3_dir/admin.credentials" "$aa" "$as"
  write_credentials "$s3_dir/credentials" "$ca" "$cs"
  write_credentials "$s3_dir/other-team.credentials" "$oa" "$os"
  (
    umask 077
    cat >"$s3_dir/identities.json" <<EOF
{
  "identities": [
    {
      "name": "caravan-admin",
      "credentials": [{"accessKey": "$aa", "secretKey": "$as"}],
      "actions": ["Admin"]
    },
    {
      "name": "caravan-clients",
      "credentials": [{"accessKey": "$ca", "secretKey": "$cs"}],
      "actions": ["Read:$s3_bucket", "Write:$s3_bucket", "List:$s3_bucket", "Tagging:$s3_bucket"]
    },
    {
      "name": "other-team",
      "credentials": [{"accessKey": "$oa", "secretKey": "$os"}],
      "actions": ["Read:$s3_bucket/other-team/*", "Write:$s3_bucket/other-team/*", "List:$s3_bucket/other-team/*"]
    }
  ]
}
EOF
  )
  chmod 600 "$s3_dir/identities.json"
}

# s3_curl CREDENTIALS_FILE CURL_ARGS... sends one SigV4-signed request and
# prints the HTTP status.
s3_curl() {
  local f=$1; shift
  curl -s -o /dev/null -w '%{http_code}' --max-time 5 \
    --aws-sigv4 "aws:amz:$s3_region:s3" \
    --user "$(read_credential "$f" aws_access_key_id):$(read_credential "$f" aws_secret_access_key)" "$@"
}

# s3_bucket_ready creates the bucket (idempotent) and checks that it answers.
s3_bucket_ready() {
  local code
  code=$(s3_curl "$s3_dir/admin.credentials" -X PUT "$s3_endpoint/$s3_bucket") || return 1
  [[ $code == 200 || $code == 409 ]] || return 1
  code=$(s3_curl "$s3_dir/credentials" "$s3_endpoint/$s3_bucket?list-type=2&max-keys=1&prefix=$s3_prefix%2F") || return 1
  [[ $code == 200 ]]
}

# start_s3 starts the server (if it is not running) and waits until the
# bucket answers the clients' credentials. Keys are written only when there
# are none yet; `up` of a stopped cluster writes fresh ones first.
start_s3() {
  s3_enabled || return 0
  check_weed
  if ! alive weed; then
    [[ -f $s3_dir/identities.json ]] || write_s3_identities
    mkdir -p "$s3_dir/data"
    log "starting SeaweedFS's S3 server ($s3_endpoint, bucket $s3_bucket, prefix $s3_prefix)"
    start weed "$weed_bin" server -dir="$s3_dir/data" -ip=127.0.0.1 -ip.bind=127.0.0.1 \
      -master.port=$((base + 13)) -master.port.grpc=$((base + 6)) \
      -volume.port=$((base + 14)) -volume.port.grpc=$((base + 7)) \
      -filer.port=$((base + 15)) -filer.port.grpc=$((base + 8)) \
      -s3 -s3.port="$s3_port" -s3.port.grpc=$((base + 9)) -s3.port.iceberg=0 -s3.port.lance=0 \
      -s3.config="$s3_dir/identities.json" -s3.autoCreateBucket=false \
      -filer.localSocket="$s3_dir/filer.sock" -s3.localSocket="$s3_dir/s3.sock" \
      -master.telemetry=false -master.volumeSizeLimitMB=256 -volume.max=64 \
      -volume.preStopSeconds=0
  fi
  wait_for "SeaweedFS's S3 API at $s3_endpoint (see logs/weed.log)" 90 s3_bucket_ready
  start_s3_fault_proxy
}

# s3_proxy_ready checks that a signed listing passes through the proxy.
s3_proxy_ready() {
  local code
  code=$(s3_curl "$s3_dir/credentials" "http://127.0.0.1:$s3_proxy_port/$s3_bucket?list-type=2&max-keys=1&prefix=$s3_prefix%2F") || return 1
  [[ $code == 200 ]] && curl -sf --max-time 5 "http://127.0.0.1:$s3_control_port/stats" >/dev/null
}

# start_s3_fault_proxy builds and starts the test-only fault proxy (if this
# cluster runs with it and it is not running).
start_s3_fault_proxy() {
  s3_fault_proxy_on || return 0
  if ! alive s3fault; then
    log "building and starting the S3 fault proxy (TEST ONLY; 127.0.0.1:$s3_proxy_port, control http://127.0.0.1:$s3_control_port)"
    if ! (cd "$root" && go build -o "$dir/.s3fault.tmp" ./internal/s3fault/cmd/s3fault); then
      echo "cluster: building the S3 fault proxy (go build ./internal/s3fault/cmd/s3fault) failed" >&2
      exit 1
    fi
    mv -f "$dir/.s3fault.tmp" "$dir/s3fault"
    start s3fault "$dir/s3fault" -listen "127.0.0.1:$s3_proxy_port" -control "127.0.0.1:$s3_control_port" \
      -target "$s3_endpoint" -log-level debug
  fi
  wait_for "the S3 fault proxy at 127.0.0.1:$s3_proxy_port (see logs/s3fault.log)" 30 s3_proxy_ready
}

stop_s3_fault_proxy() { stop_bounded s3fault "the S3 fault proxy"; }

# stop_s3 stops the server this cluster started (its pid file), bounded:
# weed ignores SIGTERM for seconds while it flushes.
stop_s3() { stop_bounded weed SeaweedFS; }

# stop_bounded NAME WHAT stops the process of pids/NAME.pid: SIGTERM, then
# SIGKILL after 5s, and waits until it is gone (its ports free).
stop_bounded() {
  local p
  p=$(pid_of "$1")
  if [[ -n $p ]] && kill -0 "$p" 2>/dev/null; then
    log "stopping $2"
    kill -TERM "$p" 2>/dev/null || true
    local deadline=$((SECONDS + 5))
    while kill -0 "$p" 2>/dev/null && (( SECONDS < deadline )); do sleep 0.2; done
    kill -KILL "$p" 2>/dev/null || true
    while kill -0 "$p" 2>/dev/null; do sleep 0.1; done
  fi
  rm -f "$dir/pids/$1.pid"
}

status_s3() {
  s3_enabled || [[ -e $dir/pids/weed.pid ]] || return 0
  if alive weed; then echo "weed: running (pid $(pid_of weed), S3 $s3_endpoint)"; else echo "weed: stopped"; fi
  s3_fault_proxy_on || return 0
  if alive s3fault; then
    echo "s3fault: running (pid $(pid_of s3fault), proxy 127.0.0.1:$s3_proxy_port, control http://127.0.0.1:$s3_control_port)"
  else
    echo "s3fault: stopped"
  fi
}

# render_store NODE prints the driver plugin's checkpoint store settings:
# the shared directory, or the S3 store block.
render_store() {
  if ! s3_enabled; then
    echo "    checkpoint_store  = \"$dir/checkpoints\""
    return
  fi
  cat <<EOF
    # No shared directory: both clients reach the S3 server
    # (scripts/cluster/s3.sh).
    store {
      endpoint         = "$(s3_client_endpoint)"
      tls              = false
      bucket           = "$s3_bucket"
      prefix           = "$s3_prefix"
      region           = "$s3_region"
      path_style       = true
      credentials_file = "$s3_dir/credentials"
    }
EOF
}
