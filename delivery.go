package sftp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/sluicehq/sftp/internal/sshfx"
)

// How an upload reaches its name: the delivery. Put, PutReader and the files of a
// tree all go one way, chosen once per call (transferOptions.delivery), through the
// same steps, each a switch on it: the name written (uploadName), the handle that
// writes it (openUpload), the close (closing), what a failure leaves (discardFailed)
// and what makes the file appear under its name (deliver).
//
//   - Atomic, the default: a part file beside the name, created exclusively
//     (createRemotePart), renamed over the name once every byte is acknowledged and
//     the handle closed; posix-rename@openssh.com, where offered, replaces an
//     existing file atomically. Without it a plain RENAME onto an existing file is
//     refused by some servers (Azure Blob Storage calls it "a protocol violation";
//     Hetzner's Storage Box answers code 11; OpenSSH's sftp-server FAILURE). Put then
//     looks (LSTAT of both names), removes the old file and renames again
//     (replaceByRemove): not atomic, since for one round trip the name holds nothing,
//     but the name never holds anything other than the old file or the whole new one,
//     and the new file is complete and closed before the old one goes. That is done
//     by default, not by option: Put's contract is to replace the file, the step is
//     taken only after the server refused the atomic way, and it costs nothing where
//     the server replaces. A server that refuses RENAME altogether (MinIO:
//     OP_UNSUPPORTED) fails the upload, its part removed, with a pointer to InPlace;
//     later atomic uploads of the Client fail at once, before sending their data.
//   - In place (InPlace): the name itself, created exclusively as a part file is (an
//     existing file, or a link, at the name is removed first and never written
//     through), written front to back on one channel, and closed. For servers without
//     rename (MinIO), workflows that fire on the uploaded name (AWS Transfer Family's
//     OnUpload), and stores where a rename is a copy (SFTPGo on S3). Readers of the
//     name see the file grow; a failed upload's file is removed, so that no partial
//     file stays under the final name (Resume, which continues a part file, does not
//     apply).
//   - Blind (NoCheckDest): the name itself, opened for writing (create, truncate) with
//     nothing looked at before or done after, for write-only accounts (drop folders)
//     that refuse LSTAT, REMOVE and RENAME. A failed upload leaves what it wrote: the
//     server would refuse to remove it.
type delivery uint8

const (
	deliverAtomic delivery = iota
	deliverInPlace
	deliverBlind
)

// InPlace makes Put and PutReader write each file under its final name, front to back
// on one channel, and close it, instead of writing a part file and renaming it over
// the name at the end: for servers that cannot rename (MinIO), workflows that act on
// the uploaded name (AWS Transfer Family's OnUpload), and object stores where a
// rename is a full copy (SFTPGo on S3, GCS, Azure). The file is created exclusively,
// as a part file is: an existing file at the name (or a link, which is never written
// through) is removed first, so the new file gets the source's mode as it would by
// rename. Readers of the name see the file grow; a failed upload removes what it
// wrote, so that no partial file stays under the final name. Resume does not apply
// (there is no part file to continue) and is refused with it.
func InPlace() TransferOption {
	return func(o *transferOptions) error { o.delivery = max(o.delivery, deliverInPlace); return nil }
}

// NoCheckDest is for write-only accounts ("upload only", drop folders of managed
// file-transfer products), which refuse everything but creating and writing a file:
// Put and PutReader look at nothing on the server (no LSTAT of the destination, of a
// tree's root or of PutAll's directory) and write each file under its final name as
// InPlace does, opened for writing with create and truncate, without removing
// anything first or after: a failed upload leaves what it wrote. Directories a tree
// needs are made with MKDIR, which such servers often refuse. SkipUnchanged and
// Resume, which look at the destination, are refused with it. Without this option a
// Put whose first LSTAT is refused with PERMISSION_DENIED says to use it.
func NoCheckDest() TransferOption {
	return func(o *transferOptions) error { o.delivery = deliverBlind; return nil }
}

// errDeliveryOption refuses an option that the call's delivery cannot honour.
func (o *transferOptions) checkDelivery() error {
	name := map[delivery]string{deliverInPlace: "InPlace", deliverBlind: "NoCheckDest"}[o.delivery]
	switch {
	case o.delivery == deliverAtomic:
	case o.resume:
		return fmt.Errorf("sftp: Resume continues a part file, which %s does not write", name)
	case o.delivery == deliverBlind && o.skipUnchanged:
		return errors.New("sftp: SkipUnchanged looks at the destination, which NoCheckDest does not")
	}
	return nil
}

// blind reports whether the call looks at nothing on the server before it writes.
func (t *getPutCall) blind() bool { return t.o.delivery == deliverBlind }

// uploadName is the name an upload to dst writes: its part file, or dst itself.
func (t *getPutCall) uploadName(dst string) string {
	if t.o.delivery == deliverAtomic {
		return remotePart(dst)
	}
	return dst
}

// openUpload opens target, uploadName's name, for an upload, as the delivery says.
func (t *getPutCall) openUpload(ctx context.Context, target string, perm fs.FileMode) (*File, error) {
	var f *File
	var err error
	switch t.o.delivery {
	case deliverAtomic:
		if err := t.c.renameRefused(); err != nil {
			return nil, err
		}
		return t.createRemotePart(ctx, target, perm)
	case deliverInPlace:
		f, err = t.createRemotePart(ctx, target, perm)
	default:
		f, err = t.openRemote(ctx, target, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	}
	if f != nil {
		// The name shows the file as it grows: one lane, WRITEs in offset order, as a
		// device's (the field's name says why else a file never stripes).
		f.append = true
	}
	return f, err
}

// closing is finishPut's closeFile for an upload through f, acked bytes known
// written: a failed upload's part is cut to them through the handle (closeCutting),
// except in a write-only account, whose handle is only closed.
func (t *getPutCall) closing(f *File, acked int64) func(failed bool) error {
	if t.blind() {
		return func(bool) error { return f.Close() }
	}
	return closeCutting(f, acked)
}

// discardFailed reports whether a failed upload's file goes (removeUnproven): a part
// file of which nothing is known written, or a file written in place, whatever it
// holds. A write-only account's stays: the server would refuse.
func (t *getPutCall) discardFailed(acked int64) bool {
	switch t.o.delivery {
	case deliverInPlace:
		return true
	case deliverBlind:
		return false
	}
	return acked == 0
}

// deliver makes the upload written to target, closed, appear as dst: the rename of a
// part file, or nothing for a file written in place.
func (t *getPutCall) deliver(ctx context.Context, target, dst string) error {
	if target == dst {
		return nil
	}
	return t.renameOver(ctx, target, dst)
}

// renameOver renames the complete part file over dst; see the atomic delivery above.
func (t *getPutCall) renameOver(ctx context.Context, part, dst string) error {
	err := t.c.Rename(ctx, part, dst)
	var se *StatusError
	switch {
	case err == nil || !errors.As(err, &se):
		return err
	case errors.Is(err, errors.ErrUnsupported):
		t.c.facts.refuse(RefusedRename, se)
		t.removeUnproven(context.WithoutCancel(t.ctx), part) // it can never reach its name
		return fmt.Errorf("%w (InPlace uploads under the final name)", err)
	case t.c.hasExt(extPosixRename) || !isBareFailure(err):
		return err // posix-rename replaces: its failure is about something else
	}
	return t.replaceByRemove(ctx, part, dst, se, err)
}

// replaceByRemove replaces dst by part where the server's RENAME refused to (se,
// renameErr): once LSTAT shows an existing file or link at dst (not a directory) and
// the part still there, dst is removed and the RENAME sent again.
func (t *getPutCall) replaceByRemove(ctx context.Context, part, dst string, se *StatusError, renameErr error) error {
	if fi, err := t.c.Lstat(ctx, dst); err != nil || fi.IsDir() {
		return renameErr // nothing to replace: the refusal was about something else
	}
	if fi, err := t.c.Lstat(ctx, part); err != nil || !fi.Mode().IsRegular() {
		return renameErr
	}
	t.c.facts.refuse(RefusedRenameReplace, se)
	if err := t.c.sendRemove(ctx, dst); err != nil {
		return fmt.Errorf("sftp: the server does not rename over an existing file, and would not remove it first: %w", pathErr("remove", dst, err))
	}
	if err := t.c.Rename(ctx, part, dst); err != nil {
		return fmt.Errorf("sftp: the server does not rename over an existing file: the old one was removed, and the new one stays at %s: %w", part, err)
	}
	return nil
}

// renameRefused is the error of an atomic upload to a server that refused RENAME
// before (OP_UNSUPPORTED): it would fail at its end, after sending its data.
func (c *Client) renameRefused() error {
	if !c.facts.refused(RefusedRename) {
		return nil
	}
	return fmt.Errorf("sftp: the server refused RENAME, which an upload's part file needs to reach its name (InPlace uploads under the final name): %w", c.facts.refusals()[RefusedRename])
}

// deniedLookHint adds to err, a refused LSTAT of an upload's destination, what a
// write-only account needs.
func deniedLookHint(err error) error {
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("%w (a write-only account? NoCheckDest uploads without looking)", err)
	}
	return err
}

// sendRemove sends one REMOVE of name: no look at what name is first, as Remove takes.
func (c *Client) sendRemove(ctx context.Context, name string) error {
	return c.main.do(ctx, func(dst []byte, id uint32) []byte {
		return appendString1(dst, sshfx.TypeRemove, id, name)
	}, status("REMOVE"))
}
