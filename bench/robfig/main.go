// Times robfig/cron v3's Schedule.Next on the cases and start instants of bench/cron_bench.cc's
// BM_Starts/* benchmarks (bench/cron_vs_robfig.py builds and runs it; Go and robfig/cron are
// test-only dependencies, Debian's golang-go and golang-github-robfig-cron-dev).
//
//	GO111MODULE=off GOPATH=/usr/share/gocode go build -o robfig_next ./bench/robfig
//	robfig_next [-reps 5] [-min-time 0.5s] [-answers]
//
// Prints one line per case: "name median_ns_per_op", CPU time of the process (the garbage
// collector's included) per Next, the median of -reps timings, each at least -min-time of CPU.
// -answers prints every start instant and its answer (Unix seconds) instead.
package main

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"syscall"
	"time"

	"github.com/robfig/cron"
)

// The same as bench/cron_bench.cc's BM_Starts/*.
var cases = []struct{ name, expr, zone string }{
	{"every_5_minutes", "0 */5 * * * *", "UTC"},
	{"quarter_hours_weekdays", "*/15 9-17 * * 1-5", "UTC"},
	{"monthly", "0 0 9 1 * *", "Europe/Berlin"},
	{"leap_day", "0 0 12 29 2 *", "UTC"},
	{"new_york_dst", "30 2 * * *", "America/New_York"},
	{"quarter_hours_weekdays_new_york", "*/15 9-17 * * 1-5", "America/New_York"},
}

// startInstants is bench/cron_bench.cc's StartInstants: splitmix64 seeded with 1, whole seconds
// uniform over 2025-2030.
func startInstants() []time.Time {
	const base = 1735689600 // 2025-01-01T00:00:00Z
	const span = 2191 * 86400
	var state uint64 = 1
	starts := make([]time.Time, 0, 1000)
	for i := 0; i < 1000; i++ {
		state += 0x9e3779b97f4a7c15
		z := state
		z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
		z = (z ^ (z >> 27)) * 0x94d049bb133111eb
		z ^= z >> 31
		starts = append(starts, time.Unix(base+int64(z%span), 0).UTC())
	}
	return starts
}

var sink int64

// cpuTime is the process's user + system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		panic(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// timeOnce runs Next over the start instants until minTime of CPU has passed; ns per call.
func timeOnce(s cron.Schedule, starts []time.Time, minTime time.Duration) float64 {
	calls := 0
	begin := cpuTime()
	for {
		for _, t := range starts {
			sink += s.Next(t).Unix()
		}
		calls += len(starts)
		if spent := cpuTime() - begin; spent >= minTime {
			return float64(spent.Nanoseconds()) / float64(calls)
		}
	}
}

func main() {
	reps := flag.Int("reps", 5, "timings per case; the median is printed")
	minTime := flag.Duration("min-time", 500*time.Millisecond, "length of one timing")
	answers := flag.Bool("answers", false, "print each start instant and its answer instead")
	flag.Parse()
	parser := cron.NewParser(cron.SecondOptional | cron.Minute | cron.Hour | cron.Dom |
		cron.Month | cron.Dow | cron.Descriptor)
	starts := startInstants()
	for _, c := range cases {
		s, err := parser.Parse("CRON_TZ=" + c.zone + " " + c.expr)
		if err != nil {
			fmt.Fprintf(os.Stderr, "robfig_next: %s: %v\n", c.name, err)
			os.Exit(1)
		}
		if *answers {
			for _, t := range starts {
				fmt.Printf("%s %d %d\n", c.name, t.Unix(), s.Next(t).Unix())
			}
			continue
		}
		ns := make([]float64, *reps)
		for i := range ns {
			ns[i] = timeOnce(s, starts, *minTime)
		}
		sort.Float64s(ns)
		fmt.Printf("%s %.1f\n", c.name, ns[len(ns)/2])
	}
}
