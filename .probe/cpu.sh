#!/bin/bash
# usage: cpu.sh <cmd...> ; prints postgres children CPU and total CPU used during the command
pm=$(head -1 /var/lib/postgresql/15/main/postmaster.pid)
tck=$(getconf CLK_TCK)
pgc() { awk '{print $16+$17}' /proc/$pm/stat; }
sys() { awk '/^cpu /{print $2+$3+$4+$7+$8, $5+$6}' /proc/stat; }
a=$(pgc); read sa ia < <(sys)
"$@"
sleep 1.5
b=$(pgc); read sb ib < <(sys)
echo "postgres reaped children cpu: $(( (b-a)*1000/tck )) ms; machine busy $(( (sb-sa)*1000/tck )) ms idle $(( (ib-ia)*1000/tck )) ms"
