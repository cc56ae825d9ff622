package main

import (
	"context"
	"fmt"
	"io"
	"math"
	"math/bits"
	"strconv"
	"text/tabwriter"

	"github.com/sluicehq/sftp"
)

// df shows the space of the file systems holding remote paths, as df(1) does
// (statvfs@openssh.com): size, used, available to unprivileged users, use%, in
// 1K-blocks or with -h in powers of 1024.
func (a *app) df(ctx context.Context, args []string, human bool) (err error) {
	paths, s, closeFn, err := a.openPaths(ctx, "df", args)
	if err != nil {
		return err
	}
	defer closeInto(&err, closeFn)
	w := tabwriter.NewWriter(a.stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	unit := "1K-blocks"
	if human {
		unit = "Size"
	}
	fmt.Fprintf(w, "%s\tUsed\tAvail\tUse%%\t Path\t\n", unit)
	for _, p := range paths {
		octx, cancel := a.opCtx(ctx)
		st, err := s.client.StatVFS(octx, p)
		err = a.timeoutError(ctx, octx, "statvfs "+p, err)
		cancel()
		if err != nil {
			return fmt.Errorf("df: %w", describe(err, p))
		}
		dfLine(w, st, p, human)
	}
	return w.Flush()
}

// dfLine writes one line. Sizes are the block counts times the fragment size, held
// at the largest uint64 should a server send counts that overflow.
func dfLine(w io.Writer, st *sftp.StatVFS, p string, human bool) {
	size := mulSat(st.Blocks, st.FragmentSize)
	used := mulSat(st.Blocks-min(st.BlocksFree, st.Blocks), st.FragmentSize)
	avail := mulSat(st.BlocksAvail, st.FragmentSize)
	pct := "-"
	if total := float64(used) + float64(avail); total > 0 {
		pct = strconv.Itoa(int(math.Ceil(float64(used)*100/total))) + "%"
	}
	show := func(n uint64) string {
		if human {
			return humanSize(n)
		}
		return strconv.FormatUint((n+1023)/1024, 10)
	}
	fmt.Fprintf(w, "%s\t%s\t%s\t%s\t %s\t\n", show(size), show(used), show(avail), pct, escapeText(p))
}

func mulSat(a, b uint64) uint64 {
	hi, lo := bits.Mul64(a, b)
	if hi != 0 {
		return ^uint64(0)
	}
	return lo
}

// humanSize is df -h's: one decimal below 10, powers of 1024, rounded up.
func humanSize(n uint64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return strconv.FormatUint(n, 10)
	}
	v := float64(n)
	i := -1
	for v >= 1024 && i+1 < len(units) {
		v /= 1024
		i++
	}
	if v < 10 {
		return fmt.Sprintf("%.1f%c", v, units[i])
	}
	return fmt.Sprintf("%.0f%c", v, units[i])
}
