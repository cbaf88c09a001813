# bench/plot.sh — sourced by the scripts that compare with etcd: a picture
# of each row's latency percentiles next to the text table.
#
# need_gnuplot NAME: Debian's gnuplot-nox installed (when run as root; else
# the one line to run is said) — 0, or 1 (then no picture, the table stays).
# Needs need_debian (bench/need-etcd.sh, sourced first).
# plot_latency DATA PNG TITLE: DATA has one line per row and connection
# count: "label|conns|ours p50|p99|p99.9|etcd p50|p99|p99.9" (ms); the
# picture shows the six per row, ours beside etcd's, on a log scale.
# plot_windows DATA PNG TITLE: DATA has one line per window: "start_s
# put_p99 get_p99 txn_p99" (ms); the picture shows the three over time.
# Both return 0 whatever happens: the text table is the result, the
# picture an aid.
need_gnuplot() { need_debian "$1" gnuplot gnuplot-nox; } # bench/need-etcd.sh

plot_latency() {
  local data=$1 png=$2 title=$3 table
  rm -f "$png"
  [ -s "$data" ] || { echo "no rows measured: no latency picture"; return 0; }
  table=$(mktemp) || return 0
  # gnuplot's columns: a quoted "label conns" tick, then the six numbers;
  # a percentile that was not measured (0) is drawn as nothing (log scale).
  awk -F'|' '{ printf "\"%s, %s conns\"", $1, $2; for (i = 3; i <= 8; i++) printf " %s", ($i > 0 ? $i : "NaN"); printf "\n" }' \
    "$data" >"$table"
  gnuplot <<GP >"$table.log" 2>&1
set terminal pngcairo size 1400,700 font ",10"
set output "$png"
set title "$title"
set style data histogram
set style histogram clustered gap 2
set style fill solid 0.9 border -1
set logscale y
set ylabel "latency, ms (log scale)"
set xtics rotate by -30 scale 0
set key top left
set bmargin 10
set rmargin 14
set grid ytics
plot "$table" using 2:xtic(1) title "ours p50" lc rgb "#9ecae1", \
     "" using 3 title "ours p99" lc rgb "#3182bd", \
     "" using 4 title "ours p99.9" lc rgb "#08519c", \
     "" using 5 title "etcd p50" lc rgb "#fdd0a2", \
     "" using 6 title "etcd p99" lc rgb "#fd8d3c", \
     "" using 7 title "etcd p99.9" lc rgb "#d94701"
GP
  if [ -s "$png" ]; then
    echo "latency picture: $png"
  else # the table above stands without it
    echo "gnuplot drew no picture:"; sed 's/^/  gnuplot: /' "$table.log"
  fi
  rm -f "$table" "$table.log"
  return 0
}

plot_windows() {
  local data=$1 png=$2 title=$3
  rm -f "$png"
  [ -s "$data" ] || { echo "no windows measured: no picture"; return 0; }
  gnuplot <<GP >"$data.log" 2>&1
set terminal pngcairo size 1400,600 font ",10"
set output "$png"
set title "$title"
set xlabel "time into the run, s"
set ylabel "p99 latency in the window, ms"
set yrange [0:*]
set key top left
set grid
plot "$data" using 1:2 with linespoints title "write (fresh key)" lc rgb "#3182bd", \
     "" using 1:3 with linespoints title "point read" lc rgb "#31a354", \
     "" using 1:4 with linespoints title "2-key transaction" lc rgb "#d94701"
GP
  if [ -s "$png" ]; then
    echo "picture: $png"
  else
    echo "gnuplot drew no picture:"; sed 's/^/  gnuplot: /' "$data.log"
  fi
  rm -f "$data.log"
  return 0
}
