package sftp

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// An existing name. SFTP v3 has no status code for it: a MKDIR or an exclusive OPEN of
// a name that exists is answered FAILURE, the code that says nothing of why (later
// drafts' FILE_ALREADY_EXISTS, code 11, which ProFTPD sends, reads as FAILURE here
// too). The calls that fail only because a name exists ask the server once more, with
// LSTAT, and say fs.ErrExist when the name is there, so that "create if absent" (a
// lock file, a directory made by whichever process comes first) can be written as it
// is against a local file system. LSTAT, not STAT: a link at the name, even a dangling
// one, is what made the create fail.

// existError is err, the failure of a request that cannot succeed where name exists,
// made to match fs.ErrExist when it is a bare FAILURE and name is there now. The
// server's *StatusError is kept beside it, for errors.As. The LSTAT is bounded by ctx;
// when it fails (name missing, the call's ctx ended), err is returned as it came.
func (c *Client) existError(ctx context.Context, name string, err error) error {
	if !isBareFailure(err) {
		return err
	}
	if _, serr := c.Lstat(ctx, name); serr != nil {
		return err
	}
	return fmt.Errorf("%w (%w)", fs.ErrExist, err)
}

// isBareFailure reports whether err is a STATUS FAILURE, the code that says nothing of
// why: worth asking the server what the state is, to give the caller a better error.
func isBareFailure(err error) bool {
	var se *StatusError
	return errors.As(err, &se) && se.Code.normal() == StatusFailure
}

// exclusiveCreate reports whether flag asks OpenFile to create a file that must not
// exist yet.
func exclusiveCreate(flag int) bool {
	return flag&(os.O_CREATE|os.O_EXCL) == os.O_CREATE|os.O_EXCL
}
