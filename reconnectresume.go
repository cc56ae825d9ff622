package sftp

import (
	"context"
	"io/fs"
	"sync"
)

// The transfers of a Reconnecting: each try after a drop runs with Resume, the
// Reconnecting's Journal and SkipFiles of the files in place, so that it continues
// from proven points (resume.go) and moves each byte about once.

// Get is Client.Get, continued after a drop (see Reconnecting): each retry runs with
// Resume, leaving out the files an earlier try put in place. The first try runs with
// opts as given, so without Resume in them it replaces a part file an earlier call
// left rather than continuing it. OnProgress, if given, sees each try's reports: a
// retry counts only its own files, and a file it continues starts at its resume
// point.
func (r *Reconnecting) Get(ctx context.Context, remote, local string, opts ...TransferOption) error {
	return r.transfer(ctx, opts, func(c *Client, o ...TransferOption) error { return c.Get(ctx, remote, local, o...) })
}

// Put is Client.Put, continued after a drop as Get is. An upload whose part file
// could not be cut, because the connection was gone, continues from what the server
// had acknowledged (the Reconnecting keeps a Journal for its transfers, unless opts
// give one: see KeepJournal).
func (r *Reconnecting) Put(ctx context.Context, local, remote string, opts ...TransferOption) error {
	return r.transfer(ctx, opts, func(c *Client, o ...TransferOption) error { return c.Put(ctx, local, remote, o...) })
}

// GetAll is Client.GetAll, continued after a drop as Get is.
func (r *Reconnecting) GetAll(ctx context.Context, remotes []string, dir string, opts ...TransferOption) error {
	return r.transfer(ctx, opts, func(c *Client, o ...TransferOption) error { return c.GetAll(ctx, remotes, dir, o...) })
}

// PutAll is Client.PutAll, continued after a drop as Put is.
func (r *Reconnecting) PutAll(ctx context.Context, locals []string, dir string, opts ...TransferOption) error {
	return r.transfer(ctx, opts, func(c *Client, o ...TransferOption) error { return c.PutAll(ctx, locals, dir, o...) })
}

// Transfer runs do, a Get, Put, GetAll or PutAll the program makes on the Client it
// is given (one whose names it works out on that Client, say), with opts and the
// options it is given, and continues it after a drop as Get does: again on the next
// Client, with Resume and SkipFiles added. do must pass on the options it is given
// and do no more than the one transfer: whatever else it does is repeated. A
// PutReader cannot be continued (its reader has moved on): it is not for do.
func (r *Reconnecting) Transfer(ctx context.Context, do func(c *Client, opts ...TransferOption) error, opts ...TransferOption) error {
	return r.transfer(ctx, opts, do)
}

// transfer runs do with opts, and after a drop again with the retry options.
func (r *Reconnecting) transfer(ctx context.Context, opts []TransferOption, do func(c *Client, opts ...TransferOption) error) error {
	var given transferOptions
	for _, o := range opts {
		if o == nil {
			continue
		}
		if err := o(&given); err != nil {
			return err
		}
	}
	log := newTransferLog(given.progress, given.skipFile)
	ours := []TransferOption{OnProgress(log.report)}
	if given.journal == nil {
		ours = append(ours, KeepJournal(r.journal))
	}
	try := append(append([]TransferOption(nil), opts...), ours...)
	retry := append(append(append([]TransferOption(nil), opts...), ours...), Resume(), SkipFiles(log.skip))
	tries := 0
	return r.retry(ctx, func(c *Client) error {
		o := try
		if tries > 0 {
			o = retry
		}
		tries++
		log.startTry()
		return do(c, o...)
	}, log.advanced)
}

// transferLog is what the tries of one transfer learn from its progress reports: the
// files in place (a retry leaves them out: one entry per file completed, within
// rememberLimit), and how far each unfinished file has got, so that a try is
// known to have progressed when it got further than every one before it. It passes
// each report on to the caller's OnProgress, and asks the caller's SkipFiles first.
type transferLog struct {
	progress func(Progress)
	skipFile func(string, fs.FileInfo) bool

	mu    sync.Mutex
	done  map[string]bool // source paths of the files in place
	held  int64           // what done holds, by rememberCost; at most limit
	limit int64
	best  map[string]int64 // the most bytes of each unfinished file any try had
	moved bool             // this try got further than every one before it
}

func newTransferLog(progress func(Progress), skip func(string, fs.FileInfo) bool) *transferLog {
	return &transferLog{progress: progress, skipFile: skip, done: map[string]bool{}, best: map[string]int64{}, limit: rememberLimit}
}

// rememberLimit bounds what a transfer's log holds of the files in place. On a Get
// their names come from the server, and a tree of millions of empty files must not
// grow it without end: past the limit a file in place is not remembered, and a later
// try copies it again under Resume, which is slower, never wrong.
const rememberLimit = 16 << 20

// rememberCost is what remembering the path p costs: its bytes and the map entry.
func rememberCost(p string) int64 { return int64(len(p)) + 64 }

func (l *transferLog) report(p Progress) {
	l.mu.Lock()
	switch {
	case p.Done:
		if c := rememberCost(p.Path); !l.done[p.Path] && l.held+c <= l.limit {
			l.done[p.Path] = true
			l.held += c
		}
		delete(l.best, p.Path)
		l.moved = true
	case p.Err == nil && p.Bytes > l.best[p.Path]:
		l.best[p.Path] = p.Bytes
		l.moved = true
	}
	l.mu.Unlock()
	if l.progress != nil {
		l.progress(p) // reports come one at a time (reporter)
	}
}

// skip is a retry's SkipFiles: the caller's, and the files in place already.
func (l *transferLog) skip(src string, fi fs.FileInfo) bool {
	if l.skipFile != nil && l.skipFile(src, fi) {
		return true
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.done[src]
}

func (l *transferLog) startTry() {
	l.mu.Lock()
	l.moved = false
	l.mu.Unlock()
}

func (l *transferLog) advanced() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.moved
}
