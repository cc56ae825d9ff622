package main

import (
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sluicehq/sftp/internal/delayproxy"
	"github.com/sluicehq/sftp/internal/faultproxy"
	"github.com/sluicehq/sftp/internal/sshdtest"
)

// BenchmarkRetriesThroughBlackHole measures a stall with the command's defaults: a
// put and a get of SLUICE_FAULT_SIZE bytes (default 1 GiB) at 10 ms RTT through a
// connection that goes silent (no FIN, no reset) once 100 MiB have crossed it. The
// keepalive (10 s x 3 by default) gives the connection up and --retries continues
// the file from its part. Each run reports its seconds, the same transfer's through
// the same link undisturbed, and the difference, which is about the detection time.
//
//	go test -run '^$' -bench RetriesThroughBlackHole -benchtime 1x .
func BenchmarkRetriesThroughBlackHole(b *testing.B) {
	s, dir, size := faultBenchServer(b)
	long, err := delayproxy.New(s.Addr, 5*time.Millisecond)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { long.Close() })

	big := filepath.Join(dir, "big.bin")
	writeRandom(b, big, size, 1)
	silentAt100MiB := faultproxy.OnlyFirst(1, faultproxy.Step{After: 100 << 20, Fault: faultproxy.BlackHole})
	for _, op := range []string{"put", "get"} {
		b.Run(op, func(b *testing.B) {
			from, to := big, remoteOn(s, filepath.Join(dir, "big-up.bin"))
			if op == "get" {
				from, to = remoteOn(s, filepath.Join(dir, "big-up.bin")), filepath.Join(dir, "big-back.bin")
			}
			calm := runThroughFaults(b, s, long.Addr(), nil, op, from, to)
			for range b.N {
				var faults int
				took := runThroughFaults(b, s, long.Addr(), silentAt100MiB, op, from, to, &faults)
				if faults != 1 {
					b.Fatalf("the connection went silent %d times, not once", faults)
				}
				b.ReportMetric(took.Seconds(), "s")
				b.ReportMetric(calm.Seconds(), "s-undisturbed")
				b.ReportMetric((took - calm).Seconds(), "s-lost")
			}
			requireSameFile(b, big, filepath.Join(dir, map[string]string{"put": "big-up.bin", "get": "big-back.bin"}[op]))
		})
	}
}

// runThroughFaults runs one put or get (runThrough) through a fault proxy in front of
// target with plan (nil: none), and stores in faults, if given, how many it made.
func runThroughFaults(b *testing.B, s *sshdtest.SSHD, target string, plan faultproxy.Plan, op, from, to string, faults ...*int) time.Duration {
	b.Helper()
	var opts []faultproxy.Option
	if plan != nil {
		opts = append(opts, faultproxy.WithPlan(plan))
	}
	p, err := faultproxy.New(target, opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	port, err := strconv.Atoi(p.Addr()[strings.LastIndexByte(p.Addr(), ':')+1:])
	if err != nil {
		b.Fatal(err)
	}
	took := runThrough(b, s, p.Addr(), port, op, from, to)
	for _, n := range faults {
		*n = p.Faults()
	}
	return took
}
