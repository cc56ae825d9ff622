package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"time"

	"golang.org/x/crypto/ssh"
)

// The service case (-case service): what a Go service sharing one client between
// requests costs. N transfers of one size run at once on ONE client and one SSH
// connection, each the way a handler would write it: a download is Open + io.Copy
// into a writer (the response), an upload is Create + io.Copy from a plain io.Reader
// (the request body, whose size the client cannot see). sluice with NewClient's
// defaults, pkg/sftp with its defaults and with the pkgsftp-tuned row's options. Each
// run is a child process of its own, so its peak RSS (VmHWM), peak goroutine count
// (sampled by the child) and CPU are its own; throughput is all bytes over the time
// from the first transfer's start to the last one's end.

const (
	serviceSluice      = "sluice"
	servicePkgSFTP     = "pkgsftp"
	servicePkgSFTPTune = "pkgsftp-tuned"
)

// serviceClientTitles names the service case's clients in table order; ratios divide
// the first one's figures by another's, and the RSS target compares the first with the
// second (pkg/sftp with its defaults, as a service would take it).
var serviceClientTitles = []struct{ id, title string }{
	{serviceSluice, "sluice default"},
	{servicePkgSFTP, "pkg/sftp default"},
	{servicePkgSFTPTune, "pkg/sftp tuned"},
}

// serviceRSSFloor and serviceRSSFactor are issue 27's memory target: sluice's peak
// RSS under max(factor × pkg/sftp default's in the same round, floor).
const (
	serviceRSSFloor  = 96 << 20
	serviceRSSFactor = 1.5
)

// serviceOptions shape the service case.
type serviceOptions struct {
	transfers int   // at once on the one client
	size      int64 // bytes each
	// profileDir, if set, gets a heap profile of every sluice run, written when the
	// child's sampled heap is at its highest.
	profileDir string
}

// serviceJob is what a service child runs, beside the connection in job.
type serviceJob struct {
	Client    string    `json:"client"`
	Transfers int       `json:"transfers"`
	Size      int64     `json:"size"`
	Dir       direction `json:"dir"`
	// Source is the file every download reads, and every upload's local source.
	Source string `json:"source"`
	// UploadPrefix names the uploads' destinations: prefix-0.bin, prefix-1.bin, ….
	UploadPrefix string `json:"upload_prefix,omitempty"`
	// HeapProfile, if set, is where the child writes a heap profile at its peak.
	HeapProfile string `json:"heap_profile,omitempty"`
}

// serviceResult is a service child's one line of output.
type serviceResult struct {
	Bytes          int64   `json:"bytes"`
	Seconds        float64 `json:"seconds"` // first transfer's start to last one's end
	PeakRSS        int64   `json:"peak_rss"`
	PeakHeap       int64   `json:"peak_heap"` // Go heap objects, sampled
	PeakGoroutines int     `json:"peak_goroutines"`
	// GoroutinesAfter is the count once every transfer has ended and its file is
	// closed, with the client still open: what a service holds between requests.
	GoroutinesAfter int     `json:"goroutines_after"`
	CPUSeconds      float64 `json:"cpu_seconds"`
}

func (r serviceResult) rate() float64 {
	if r.Seconds <= 0 {
		return 0
	}
	return float64(r.Bytes) / (1 << 20) / r.Seconds
}

// serviceClient is one client library as a service uses it.
type serviceClient interface {
	// download copies the remote file into w and returns the bytes copied.
	download(ctx context.Context, remote string, w io.Writer) (int64, error)
	// upload creates the remote file from r and returns the bytes copied.
	upload(ctx context.Context, remote string, r io.Reader) (int64, error)
	close() error
}

// serviceClients makes a client of each kind on an SSH connection; the sluice one is
// absent from a -tags nosluice build.
var serviceClients = map[string]func(ctx context.Context, conn *ssh.Client) (serviceClient, error){}

// serviceClientsInBuild lists the clients this build has, in table order.
func serviceClientsInBuild() []string {
	var out []string
	for _, c := range serviceClientTitles {
		if serviceClients[c.id] != nil {
			out = append(out, c.id)
		}
	}
	return out
}

func serviceTitle(id string) string {
	for _, c := range serviceClientTitles {
		if c.id == id {
			return c.title
		}
	}
	return id
}

// serviceMeasure is one client's run in one round.
type serviceMeasure struct {
	serviceResult
	round int
}

// serviceCell is one table's measurements (one RTT, one direction): per client, one
// per round.
type serviceCell struct {
	dir    direction
	res    map[string][]serviceMeasure
	failed map[string]error
}

// serviceTable runs the service case at one RTT, a table per direction.
func (h *harness) serviceTable(ctx context.Context, rtt time.Duration, deadline time.Time, out, progress io.Writer) error {
	cfg := h.cfg
	clients := serviceClientsInBuild()
	src, err := h.env.source(cfg.service.size)
	if err != nil {
		return err
	}
	addr, where, closeLink, err := h.link(rtt, false)
	if err != nil {
		return err
	}
	defer closeLink()
	for _, dir := range cfg.dirs {
		cell := &serviceCell{dir: dir, res: map[string][]serviceMeasure{}, failed: map[string]error{}}
		stopped := h.serviceRounds(ctx, cell, clients, rtt, addr, src, deadline, progress)
		writeServiceTable(out, fmt.Sprintf("service, %s, RTT %s (%s), %d × %s at once on one client, %d round(s)",
			dir, formatRTT(rtt), where, cfg.service.transfers, formatSize(cfg.service.size), cfg.rounds), clients, cell)
		if stopped {
			return errStopped
		}
	}
	return nil
}

// serviceRounds runs one table's rounds, alternating the clients' order, and reports
// whether the deadline or a signal stopped it.
func (h *harness) serviceRounds(ctx context.Context, cell *serviceCell, clients []string, rtt time.Duration, addr, src string, deadline time.Time, progress io.Writer) bool {
	cfg := h.cfg
	for round := range cfg.rounds {
		order := slices.Clone(clients)
		if round%2 == 1 {
			slices.Reverse(order)
		}
		for _, client := range order {
			if ctx.Err() != nil || time.Now().After(deadline) {
				return true
			}
			if cell.failed[client] != nil {
				continue
			}
			sj := &serviceJob{Client: client, Transfers: cfg.service.transfers, Size: cfg.service.size, Dir: cell.dir, Source: src}
			if cell.dir == upload {
				sj.UploadPrefix = filepath.Join(h.env.work, fmt.Sprintf("svc-%s-%d", client, round))
			}
			if cfg.service.profileDir != "" && client == serviceSluice {
				sj.HeapProfile = filepath.Join(cfg.service.profileDir, fmt.Sprintf("heap-%s-%s-%s-%d.pprof", client, cell.dir, formatRTT(rtt), round+1))
			}
			j := &job{Addr: addr, User: h.env.sshd.User, KeyFile: h.env.sshd.KeyFile, HostKey: h.env.hostKey,
				Timeout: cfg.timeout, Service: sj}
			res, err := h.serviceChild(ctx, j)
			if err == nil && sj.UploadPrefix != "" {
				err = checkUploads(sj)
			}
			removeUploads(sj)
			if err != nil {
				cell.failed[client] = fmt.Errorf("round %d: %w", round+1, err)
				fmt.Fprintf(progress, "service rtt=%s %s %s: %v\n", formatRTT(rtt), client, cell.dir, err)
				continue
			}
			cell.res[client] = append(cell.res[client], serviceMeasure{res, round})
			if cfg.verbose {
				fmt.Fprintf(progress, "service rtt=%s %-13s %-4s round %d: %7.1f MiB/s, peak RSS %.0f MiB, heap %.0f MiB, %d goroutines (%d after), CPU %.1f s\n",
					formatRTT(rtt), client, cell.dir, round+1, res.rate(), inMiB(res.PeakRSS), inMiB(res.PeakHeap),
					res.PeakGoroutines, res.GoroutinesAfter, res.CPUSeconds)
			}
		}
	}
	return false
}

func inMiB(n int64) float64 { return float64(n) / mib }

// uploadName is the i-th upload's destination.
func (s *serviceJob) uploadName(i int) string { return fmt.Sprintf("%s-%d.bin", s.UploadPrefix, i) }

// checkUploads confirms every upload left a file of the full size; the bytes are the
// client's to get right, and a short or missing file fails the run.
func checkUploads(s *serviceJob) error {
	for i := range s.Transfers {
		fi, err := os.Stat(s.uploadName(i))
		if err != nil {
			return err
		}
		if fi.Size() != s.Size {
			return fmt.Errorf("%s has %d bytes, want %d", s.uploadName(i), fi.Size(), s.Size)
		}
	}
	return nil
}

func removeUploads(s *serviceJob) {
	if s.UploadPrefix == "" {
		return
	}
	for i := range s.Transfers {
		_ = os.Remove(s.uploadName(i))
	}
}

// serviceChild runs one client's transfers in a child process.
func (h *harness) serviceChild(ctx context.Context, j *job) (serviceResult, error) {
	var res serviceResult
	if err := h.childJSON(ctx, j, &res); err != nil {
		return serviceResult{}, err
	}
	if want := int64(j.Service.Transfers) * j.Service.Size; res.Bytes != want {
		return serviceResult{}, fmt.Errorf("moved %d bytes, want %d", res.Bytes, want)
	}
	return res, nil
}

// serviceChildMain is childMain for a service job: connect, run the transfers while
// sampling, report.
func serviceChildMain(j *job) int {
	s := j.Service
	mk := serviceClients[s.Client]
	if mk == nil {
		fmt.Fprintf(os.Stderr, "child: no client %q in this build\n", s.Client)
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), j.Timeout)
	defer cancel()
	conn, err := dial(ctx, j)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: dial:", err)
		return 1
	}
	defer conn.Close()
	c, err := mk(ctx, conn)
	if err != nil {
		fmt.Fprintln(os.Stderr, "child: client:", err)
		return 1
	}
	defer c.close()
	res, err := runService(ctx, c, s)
	if err != nil {
		fmt.Fprintf(os.Stderr, "child: %s %s ×%d: %v\n", s.Client, s.Dir, s.Transfers, err)
		return 1
	}
	res.PeakRSS = peakRSS()
	res.CPUSeconds = processCPU().Seconds()
	if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
		return 1
	}
	return 0
}

// runService runs s's transfers at once on c while a sampler records the peak
// goroutine count and Go heap. Every transfer must move exactly s.Size bytes.
func runService(ctx context.Context, c serviceClient, s *serviceJob) (serviceResult, error) {
	smp := startSampler(s.HeapProfile)
	start := time.Now()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		total int64
		errs  []error
	)
	for i := range s.Transfers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n, err := serviceTransfer(ctx, c, s, i)
			if err == nil && n != s.Size {
				err = fmt.Errorf("transfer %d moved %d bytes, want %d", i, n, s.Size)
			}
			mu.Lock()
			total += n
			if err != nil {
				errs = append(errs, err)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	elapsed := time.Since(start)
	peak := smp.stop()
	if len(errs) > 0 {
		return serviceResult{}, errors.Join(errs...)
	}
	if peak.profileErr != nil {
		return serviceResult{}, fmt.Errorf("heap profile: %w", peak.profileErr)
	}
	return serviceResult{Bytes: total, Seconds: elapsed.Seconds(), PeakHeap: peak.heap,
		PeakGoroutines: peak.goroutines, GoroutinesAfter: runtime.NumGoroutine()}, nil
}

// serviceTransfer is the i-th transfer, as a handler writes it.
func serviceTransfer(ctx context.Context, c serviceClient, s *serviceJob, i int) (int64, error) {
	if s.Dir == download {
		var w countingWriter
		return c.download(ctx, s.Source, &w)
	}
	f, err := os.Open(s.Source)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	// A request body: a plain reader, so neither client sees a size or an *os.File.
	return c.upload(ctx, s.uploadName(i), struct{ io.Reader }{f})
}

// copyThenClose copies src to dst and closes f, the remote file one of them is, as a
// handler ends a transfer: a failed Close (the server's verdict on an upload) fails it.
func copyThenClose(dst io.Writer, src io.Reader, f io.Closer) (int64, error) {
	n, err := io.Copy(dst, src)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return n, err
}

// countingWriter is a response that only counts; it has no ReadFrom, so io.Copy uses
// the remote file's WriteTo.
type countingWriter struct{ n int64 }

func (w *countingWriter) Write(p []byte) (int, error) { w.n += int64(len(p)); return len(p), nil }

// sampler records the peak goroutine count and Go heap of this process every few
// milliseconds, and writes a heap profile (if asked) whenever the heap reaches a new
// high by a margin, so that the last one written is near the peak.
type sampler struct {
	done    chan struct{}
	stopped chan samplePeak
}

type samplePeak struct {
	goroutines int
	heap       int64
	profileErr error
}

const sampleEvery = 2 * time.Millisecond

func startSampler(profile string) *sampler {
	s := &sampler{done: make(chan struct{}), stopped: make(chan samplePeak, 1)}
	go s.run(profile)
	return s
}

func (s *sampler) run(profile string) {
	var peak samplePeak
	var profiled int64
	m := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	t := time.NewTicker(sampleEvery)
	defer t.Stop()
	for {
		peak.goroutines = max(peak.goroutines, runtime.NumGoroutine()-1) // not the sampler
		metrics.Read(m)
		if m[0].Value.Kind() == metrics.KindUint64 {
			peak.heap = max(peak.heap, int64(m[0].Value.Uint64()))
		}
		if profile != "" && peak.heap > profiled+profiled/8 {
			profiled = peak.heap
			if err := writeHeapProfile(profile); err != nil {
				peak.profileErr = err
			}
		}
		select {
		case <-s.done:
			s.stopped <- peak
			return
		case <-t.C:
		}
	}
}

// writeHeapProfile replaces the file at path with a heap profile of this moment.
func writeHeapProfile(path string) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	err = pprof.WriteHeapProfile(f)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func (s *sampler) stop() samplePeak {
	close(s.done)
	return <-s.stopped
}

// writeServiceTable prints one row per client: medians over rounds, and sluice's
// figures over each other client's, per round then median.
func writeServiceTable(w io.Writer, heading string, clients []string, cell *serviceCell) {
	fmt.Fprintf(w, "\n### %s\n\n", heading)
	fmt.Fprintln(w, "Downloads: Open + io.Copy into a counting writer; uploads: Create + io.Copy from a plain io.Reader. "+
		"MiB/s = all bytes / time from the first transfer's start to the last one's end. "+
		"peak RSS = the child's VmHWM (whole process); heap = Go heap objects (live and not yet collected), sampled every 2 ms; goroutines sampled likewise, and counted again once every file is closed (client still open). "+
		"sluice/row = sluice's figure over the row's in the same round, median over rounds (MiB/s: > 1 is faster; RSS: > 1 is bigger).")
	fmt.Fprintln(w)
	fmt.Fprintln(w, "| client | MiB/s | sluice/row MiB/s | peak RSS MiB | sluice/row RSS | peak heap MiB | peak goroutines | goroutines after | CPU s |")
	fmt.Fprintln(w, "|---|--:|--:|--:|--:|--:|--:|--:|--:|")
	base := cell.res[clients[0]]
	for _, c := range clients {
		ms := cell.res[c]
		if len(ms) == 0 {
			fmt.Fprintf(w, "| %s | | | | | | | | |\n", serviceTitle(c))
			continue
		}
		med := func(f func(serviceMeasure) float64) float64 {
			v, _ := medianBy(ms, f)
			return v
		}
		rateRatio, rssRatio := "", ""
		if c != clients[0] {
			rateRatio = ratioText(serviceRatios(base, ms, serviceMeasure.rateF))
			rssRatio = ratioText(serviceRatios(base, ms, serviceMeasure.rssF))
		}
		fmt.Fprintf(w, "| %s | %.1f | %s | %.0f | %s | %.0f | %.0f | %.0f | %.1f |\n", serviceTitle(c),
			med(serviceMeasure.rateF), rateRatio, med(serviceMeasure.rssF), rssRatio,
			med(func(m serviceMeasure) float64 { return inMiB(m.PeakHeap) }),
			med(func(m serviceMeasure) float64 { return float64(m.PeakGoroutines) }),
			med(func(m serviceMeasure) float64 { return float64(m.GoroutinesAfter) }),
			med(func(m serviceMeasure) float64 { return m.CPUSeconds }))
	}
	if line := serviceTargetLine(cell, clients); line != "" {
		fmt.Fprintf(w, "\n%s\n", line)
	}
	var failed []string
	for _, c := range clients {
		if err := cell.failed[c]; err != nil {
			failed = append(failed, fmt.Sprintf("- %s: %v", serviceTitle(c), err))
		}
	}
	if len(failed) > 0 {
		fmt.Fprintf(w, "\nFailed runs:\n%s\n", strings.Join(failed, "\n"))
	}
}

func (m serviceMeasure) rateF() float64 { return m.rate() }
func (m serviceMeasure) rssF() float64  { return inMiB(m.PeakRSS) }

// serviceRatios pairs a's and b's runs by round and returns f(a)/f(b) for each.
func serviceRatios(a, b []serviceMeasure, f func(serviceMeasure) float64) []float64 {
	var out []float64
	for _, x := range a {
		for _, y := range b {
			if x.round == y.round && f(y) > 0 {
				out = append(out, f(x)/f(y))
			}
		}
	}
	return out
}

func ratioText(xs []float64) string {
	v, ok := median(xs)
	if !ok {
		return ""
	}
	return fmt.Sprintf("%.2f", v)
}

// serviceTargetLine states issue 27's memory target for this table: sluice's median
// peak RSS against max(1.5 × pkg/sftp default's median, 96 MiB).
func serviceTargetLine(cell *serviceCell, clients []string) string {
	if len(clients) < 2 || clients[0] != serviceSluice || clients[1] != servicePkgSFTP {
		return ""
	}
	s, ok1 := medianBy(cell.res[serviceSluice], serviceMeasure.rssF)
	p, ok2 := medianBy(cell.res[servicePkgSFTP], serviceMeasure.rssF)
	if !ok1 || !ok2 {
		return ""
	}
	bound := max(serviceRSSFactor*p, inMiB(serviceRSSFloor))
	verdict := "met"
	if s > bound {
		verdict = fmt.Sprintf("missed by %.0f MiB (%.2f× the bound)", s-bound, s/bound)
	}
	return fmt.Sprintf("RSS target (issue 27): sluice %.0f MiB ≤ max(%.1f × pkg/sftp default %.0f MiB, %.0f MiB) = %.0f MiB: %s.",
		s, serviceRSSFactor, p, inMiB(serviceRSSFloor), bound, verdict)
}

// parse reads -service-size and checks -service-n.
func (o *serviceOptions) parse(size string) error {
	n, err := parseSize(size)
	if err != nil {
		return fmt.Errorf("-service-size: %w", err)
	}
	if n < 1 || n > 1<<30 {
		return fmt.Errorf("-service-size %s: want 1 byte to 1 GiB", size)
	}
	if o.transfers < 1 || o.transfers > 1024 {
		return fmt.Errorf("-service-n %d: want 1 to 1024", o.transfers)
	}
	o.size = n
	return nil
}
