# Sourced by the bench scripts (run.sh, soak.sh, metrics-flood.sh): a scratch directory
# `work` removed at exit with every process whose pid is added to `pids`, and the helpers
# they share. Set `scratch` (the directory's name prefix) before sourcing.
work=$(mktemp -d "/tmp/${scratch:-pushgw-bench}.XXXXXX")
pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; rm -rf "$work"; }
trap cleanup EXIT

free_port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1]); s.close()'; }
wait_port() { for _ in $(seq 1 200); do (exec 3<>/dev/tcp/127.0.0.1/"$1") 2>/dev/null && return 0; sleep 0.05; done; echo "nothing on port $1" >&2; exit 1; }
median() { sort -n | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }

# The four device tokens nghttpd answers for (files under $work/htdocs), as `tokens`.
make_tokens() {
  tokens=""
  mkdir -p "$work/htdocs/3/device"
  for i in 1 2 3 4; do
    t=$(printf '%02x' "$i"); t=$(printf "$t%.0s" $(seq 1 32))
    echo '{}' > "$work/htdocs/3/device/$t"; tokens="$tokens,$t"
  done
  tokens=${tokens#,}
}
