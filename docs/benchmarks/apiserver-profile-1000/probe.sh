#!/bin/bash
# Ad hoc: CPU-profile kube-apiserver for 15 s once bindings flow, once per scheduler kind.
out=/tmp/apiprof
done_ks=0; done_ps=0
last=0
while [ $done_ks = 0 -o $done_ps = 0 ]; do
  kc=$(ls -d /tmp/promsched-bench-1000-*/kubeconfig 2>/dev/null | head -1)
  if [ -z "$kc" ]; then sleep 2; continue; fi
  n=$(kubectl --kubeconfig $kc get --raw /metrics 2>/dev/null | grep '^apiserver_request_total{' | grep 'subresource="binding"' | grep 'verb="POST"' | awk '{s+=$2} END {print s+0}')
  if [ "$n" -gt "$((last+40))" ] && [ "$last" -gt 0 ]; then
    if pgrep -x kube-scheduler >/dev/null; then kind=ks; else kind=ps; fi
    if { [ $kind = ks ] && [ $done_ks = 0 ]; } || { [ $kind = ps ] && [ $done_ps = 0 ]; }; then
      echo "$(date +%T) profiling $kind at $n bindings" >> $out/probe.log
      kubectl --kubeconfig $kc get --raw "/debug/pprof/profile?seconds=15" > $out/$kind.pprof 2>>$out/probe.log
      n2=$(kubectl --kubeconfig $kc get --raw /metrics 2>/dev/null | grep '^apiserver_request_total{' | grep 'subresource="binding"' | grep 'verb="POST"' | awk '{s+=$2} END {print s+0}')
      echo "$(date +%T) done $kind: $((n2-n)) bindings in profile" >> $out/probe.log
      [ $kind = ks ] && done_ks=1 || done_ps=1
    fi
  fi
  last=$n
  sleep 1
done
