#!/bin/bash
# Crash loop for zerohop: camera + agent as two processes, agent publishing
# cmd_vel as TwistStamped over Cyclone DDS on loopback, recorded by cmdsub.
#   phase A: N x kill -9 camera (agent stays), restart camera
#   phase B: N x kill -9 agent (camera stays), restart agent
#   phase C: N x SIGSTOP camera 1 s, SIGCONT (both stay)
# Env: N (20), PHASES (ABC), AGENT_ARGS (extra agent flags), OUTDIR.
# After every event: wait until the agent's frames_processed grows, then
# sample fds / memfds / memfd maps / RSS / threads of both processes.
# Output in $OUTDIR: samples.tsv, events.tsv (ns timestamps), sub.txt,
# cam-*.log, agent-*.log, summary.txt. Bound: ~10 min via timeout.
set -u
N=${N:-20}
REPO=${REPO:-$(cd "$(dirname "$0")/../.." && pwd)}
BIN=${BIN:-$REPO/bin}
CMDSUB=${CMDSUB:-/tmp/zerohop-cmdsub}
# The agent finds ONNX Runtime under the checkout's .cache (make deps), whatever BIN is.
export ZEROHOP_CACHE=${ZEROHOP_CACHE:-$REPO/.cache}
OUTDIR=${OUTDIR:-/tmp/zerohop-soak}
rm -rf "$OUTDIR"; mkdir -p "$OUTDIR"; cd "$OUTDIR"
SOCKDIR=$OUTDIR/zh; SOCK=$SOCKDIR/camera.sock
AHTTP=127.0.0.1:19090; CMET=127.0.0.1:19091
export CYCLONEDDS_URI=file://$REPO/ros2/testdata/loopback.xml
DOM=${DOM:-$((150 + $$ % 50))}
ls /dev/shm > shm-before.txt

now() { date +%s%N; }
metric() { curl -s -m 1 "http://$1/metrics" 2>/dev/null | awk -v m="$2" '$1==m {print $2; f=1} END {if (!f) print -1}'; }
fp() { metric $AHTTP zerohop_frames_processed_total; }

cam_n=0; agent_n=0
start_cam() { cam_n=$((cam_n+1)); $BIN/camera --socket $SOCK --metrics $CMET > cam-$cam_n.log 2>&1 & CP=$!; }
start_agent() {
  agent_n=$((agent_n+1))
  $BIN/agent --socket $SOCK --http $AHTTP --ros2 --ros-domain $DOM --twist-stamped ${AGENT_ARGS:-} > agent-$agent_n.log 2>&1 & AP=$!
}
# wait_progress: frames_processed must grow by >= 10 within 15 s; prints the wait in ms
wait_progress() {
  local t0=$(now) base; base=$(fp); [ "$base" -lt 0 ] && base=0
  local deadline=$(( $(now) + 15000000000 ))
  while [ $(now) -lt $deadline ]; do
    local v; v=$(fp)
    if [ "$v" -ge $((base + 10)) ] 2>/dev/null || { [ "$v" -ge 10 ] && [ "$v" -lt "$base" ]; }; then
      echo $(( ($(now) - t0) / 1000000 )); return 0
    fi
    sleep 0.1
  done
  echo FAIL; return 1
}
procstat() { # pid -> fds memfd_fds memfd_maps rss_kB threads
  local p=$1
  if [ -d /proc/$p ]; then
    echo "$(ls /proc/$p/fd | wc -l) $(ls -l /proc/$p/fd 2>/dev/null | grep -c memfd) $(grep -c memfd /proc/$p/maps) $(awk '/VmRSS/ {r=$2} /RssAnon/ {a=$2} /RssShmem/ {s=$2} END {print r"/"a"/"s}' /proc/$p/status) $(awk '/Threads/ {print $2}' /proc/$p/status)"
  else echo "- - - - -"; fi
}
sample() { # phase round waitms
  printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n" "$1" "$2" "$3" "$CP" "$(procstat $CP)" "$AP" "$(procstat $AP)" \
    "$(metric $CMET 'zerohop_camera_pool_in_use{topic="points"}')/$(metric $CMET 'zerohop_camera_pool_in_use{topic="image"}')" \
    "$(metric $CMET zerohop_camera_subscribers)" "$(metric $AHTTP go_memstats_heap_inuse_bytes)" "$(metric $AHTTP go_goroutines)" >> samples.tsv
}
ev() { echo "$1 $2 $3" >> events.tsv; } # kind round ns

printf "phase\tround\twait_ms\tcam_pid\tcam(fds memfd maps rss/anon/shmem_kB thr)\tagent_pid\tagent(fds memfd maps rss/anon/shmem_kB thr)\tcam_in_use(pts/img)\tcam_subs\tagent_heap_inuse\tagent_goroutines\n" > samples.tsv
$CMDSUB $DOM rt/cmd_vel 900 > sub.txt 2>&1 & SP=$!
start_cam; sleep 1; start_agent
w=$(wait_progress); sample start 0 "$w"

PHASES=${PHASES:-ABC}
[[ $PHASES == *A* ]] && for i in $(seq 1 $N); do   # phase A
  kill -9 $CP; ev camkill $i $(now); wait $CP 2>/dev/null
  sleep 0.5
  start_cam; w=$(wait_progress); sample A $i "$w"
done
[[ $PHASES == *B* ]] && for i in $(seq 1 $N); do   # phase B
  kill -9 $AP; ev agentkill $i $(now); wait $AP 2>/dev/null
  sleep 0.3
  start_agent; w=$(wait_progress); sleep 0.3; sample B $i "$w"
done
[[ $PHASES == *C* ]] && for i in $(seq 1 $N); do   # phase C
  kill -STOP $CP; ev camstop $i $(now); sleep 1; kill -CONT $CP; ev camcont $i $(now)
  w=$(wait_progress); sample C $i "$w"
done

# Ctrl-C: agent first, then camera; time and exit status of each
t0=$(now); kill -INT $AP; wait $AP; arc=$?; at=$(( ($(now)-t0)/1000000 ))
t0=$(now); kill -INT $CP; wait $CP; crc=$?; ct=$(( ($(now)-t0)/1000000 ))
sleep 1; kill $SP 2>/dev/null; wait $SP
ls /dev/shm > shm-after.txt
{
  echo "agent SIGINT: rc=$arc in ${at} ms; camera SIGINT: rc=$crc in ${ct} ms"
  echo "dev/shm diff:"; diff shm-before.txt shm-after.txt && echo "  (none)"
  echo "socket dir after: $(ls -A $SOCKDIR 2>/dev/null | tr '\n' ' ')"
  echo "leftover zerohop processes:"; ps -eo pid,stat,cmd | grep -F "$BIN/" | grep -v grep || echo "  (none)"
} > summary.txt
cat summary.txt
