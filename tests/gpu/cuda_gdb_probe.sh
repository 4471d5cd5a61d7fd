#!/usr/bin/env bash
# What cuda-gdb can read from an NCCL kernel that waits for a stopped peer
# (2 GPUs): runs tests/gpu/allreduce_loop.py, stops rank 1 with SIGSTOP, then
# attaches cuda-gdb to rank 0 twice: `info cuda kernels`, then the progress
# script (the same expressions as common/cuda_gdb/cuda_gdb.cc) plus type queries.
# Prints attach times and the raw output. For each NCCL_PROTO in $PROTOS.
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
RES=${OUT:-$PWD/probe-results}; mkdir -p "$RES"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 PYTHONUNBUFFERED=1
PY=${PY:-python3}
for proto in ${PROTOS:-Simple LL}; do
  W=/tmp/xpu-probe-$proto; rm -rf "$W"; mkdir -p "$W"
  NCCL_PROTO=$proto NCCL_ALGO=Ring torchrun --standalone --nproc-per-node 2 "$HERE/allreduce_loop.py" --mib 64 \
    > "$W/loop.log" 2>&1 &
  TPID=$!
  for i in $(seq 60); do sleep 1; grep -q "rank 1 iter 300" "$W/loop.log" && break; done
  P0=$(pgrep -f "allreduce_loop.py" -a | grep -v torchrun | awk '{print $1}' | sort -n | sed -n 1p)
  P1=$(pgrep -f "allreduce_loop.py" -a | grep -v torchrun | awk '{print $1}' | sort -n | sed -n 2p)
  echo "== proto $proto: pids $P0 $P1 after $i s"; tail -2 "$W/loop.log"
  kill -STOP "$P1"; sleep 3
  printf 'set pagination off\nset confirm off\nset cuda break_on_launch none\ninfo cuda kernels\ndetach\nquit\n' > "$W/list.gdb"
  t=$(date +%s.%N)
  timeout 120 cuda-gdb -p "$P0" -batch -nx -q -x "$W/list.gdb" > "$W/list.out" 2>&1; rc=$?
  echo "kernel list: rc=$rc in $($PY -c "print(round($(date +%s.%N)-$t,1))") s"
  grep -iE "nccl|kernel|error|warn" "$W/list.out" | head -12
  K=$(grep -m1 -E "ncclDevKernel|ncclKernel" "$W/list.out" | sed 's/\*/ /' | awk '{print $1}')
  {
    printf 'set pagination off\nset confirm off\nset cuda break_on_launch none\n'
    printf 'cuda kernel %s block (0,0,0) thread (0,0,0)\n' "${K:-0}"
    echo 'info cuda kernels'
    echo 'ptype ncclShmem'
    echo 'print sizeof(ncclShmem)'
    echo 'print &ncclShmem'
    echo 'printf "XPU-NCCL ring_prev=%d ring_next=%d\n", ncclShmem.channel.ring.prev, ncclShmem.channel.ring.next'
    echo 'printf "XPU-NCCL recv_step=%llu recv_tail=%llu\n", ncclShmem.groups[0].recvConns[0]->step, *ncclShmem.groups[0].recvConns[0]->tail'
    echo 'printf "XPU-NCCL send_step=%llu send_head=%llu\n", ncclShmem.groups[0].sendConns[0]->step, *ncclShmem.groups[0].sendConns[0]->head'
    echo 'info symbol ncclShmem'
    echo 'x/32wx (@shared unsigned int*)0'
    echo 'info cuda threads'
    printf 'cuda kernel %s block (1,0,0) thread (0,0,0)\n' "${K:-0}"
    echo 'printf "XPU-NCCL b1 ring_prev=%d ring_next=%d\n", ncclShmem.channel.ring.prev, ncclShmem.channel.ring.next'
    echo 'bt'
    echo 'detach'; echo 'quit'
  } > "$W/prog.gdb"
  t=$(date +%s.%N)
  timeout 180 cuda-gdb -p "$P0" -batch -nx -q -x "$W/prog.gdb" > "$W/prog.out" 2>&1; rc=$?
  echo "progress: rc=$rc in $($PY -c "print(round($(date +%s.%N)-$t,1))") s"
  grep -v "^\[New Thread\|^\[Thread" "$W/prog.out" | head -c 6000
  # native stacks cost (what the evidence collector runs)
  printf 'set pagination off\nthread apply all bt 20\ndetach\nquit\n' > "$W/bt.gdb"
  t=$(date +%s.%N)
  timeout 120 cuda-gdb -p "$P0" -batch -nx -q -x "$W/bt.gdb" > "$W/bt.out" 2>&1; rc=$?
  echo "native bt: rc=$rc in $($PY -c "print(round($(date +%s.%N)-$t,1))") s, $(grep -c '^#' "$W/bt.out") frames"
  grep -c "ncclDevKernel\|Active" "$W/list.out"
  cp "$W"/*.out "$W"/*.gdb "$RES/" 2>/dev/null; for f in "$RES"/*.out; do mv "$f" "${f%.out}-$proto.out"; done
  kill -CONT "$P1"; kill -9 "$P0" "$P1" 2>/dev/null; kill $TPID 2>/dev/null; sleep 2
  pkill -9 -x pt_main_thread 2>/dev/null; pkill -9 -x torchrun 2>/dev/null; sleep 1
done
