package sftp

import (
	"errors"
	"sync"
)

// A Journal carries what this process learned about its uploads' part files from one
// call to the next: for each upload that failed, how much of its part file the server
// had acknowledged, in one run from the start. A later Put or PutReader of the same
// file with Resume and the same Journal continues the part from there when that is
// further than what the part itself proves (its end, when the failed call could cut
// it and leave the resume mark; else 64 MiB before its end, see Resume). So a call
// retried after its connection dropped, when the part could not be cut because the
// connection was gone, sends again only what was in flight, not up to 64 MiB more.
// Downloads need no Journal: their part file is local, cut and marked whatever
// stopped them, while the process runs.
//
// A Journal is for the retries of one process against one server and account, as a
// loop that reconnects and calls again does (sluice --retries): what it records is a
// statement about files on that server under those names. It relies on nothing else
// writing those part files between the calls: another program, or a call without the
// Journal (another process's, say), that writes or replaces a part file it names
// makes its entry wrong. Every call that creates a part afresh drops the entry for
// it, and an entry past the part's end is ignored; the part is still checked as
// Resume checks it (the file looked at, and its bytes just before the point those of
// the source).
//
// Why the acknowledged prefix is proven: every WRITE the server acknowledged is in
// the part, and what the failed call may still have had land after it stopped (WRITEs
// in flight, which a server may carry out after the connection is gone) is the
// source's bytes at their offsets, or a stripe round's nonce, which lies at or past
// the prefix (resume.go). A CLOSE the server answers with a failure may report a
// write it lost: after one, nothing is recorded.
//
// A Journal holds one entry per part file of a failed upload (the path and a count),
// and at most 4096 of them: past that, an entry made room for costs only the
// 64 MiB rewind. It is safe for concurrent use by several calls.
type Journal struct {
	mu    sync.Mutex
	parts map[string]int64 // part file name -> bytes acknowledged from the start
}

// maxJournalEntries bounds what a Journal holds.
const maxJournalEntries = 1 << 12

// NewJournal returns an empty Journal.
func NewJournal() *Journal {
	return &Journal{parts: make(map[string]int64)}
}

// KeepJournal makes a Put, PutReader or tree upload record in j how far the part file
// of each upload that fails was acknowledged, and, with Resume, continue a part file
// from what j holds for it when that is further than the part proves (see Journal).
func KeepJournal(j *Journal) TransferOption {
	return func(o *transferOptions) error {
		if j == nil {
			return errors.New("sftp: KeepJournal(nil)")
		}
		o.journal = j
		return nil
	}
}

// written is what j holds for part: bytes known written from its start, or 0. A nil
// *Journal holds nothing.
func (j *Journal) written(part string) int64 {
	if j == nil {
		return 0
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.parts[part]
}

// record notes that part is known written up to n bytes; n 0 drops its entry.
func (j *Journal) record(part string, n int64) {
	if j == nil {
		return
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if n <= 0 {
		delete(j.parts, part)
		return
	}
	if _, ok := j.parts[part]; !ok && len(j.parts) >= maxJournalEntries {
		for k := range j.parts {
			delete(j.parts, k)
			break
		}
	}
	j.parts[part] = n
}

// forget drops part's entry: the part is created afresh, or the upload finished.
func (j *Journal) forget(part string) { j.record(part, 0) }
