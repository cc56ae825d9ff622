package main

import (
	"flag"

	sftp "github.com/sluicehq/sftp"
)

// How put's files reach their names (the library's delivery modes): by default each
// is written to a .sluice-part file beside its name and renamed over it once whole;
// --inplace writes the name itself, for servers that cannot rename (MinIO), workflows
// that act on the uploaded name (AWS Transfer Family's OnUpload), and object stores
// where a rename is a full copy (SFTPGo on S3, GCS, Azure), as rsync and rclone spell it.

// registerDelivery adds put's delivery flag.
func (x *xferFlags) registerDelivery(fs *flag.FlagSet) {
	fs.BoolVar(&x.inPlace, "inplace", false, "put: write each file under its final name, front to back, instead of a part file\nrenamed into place (servers without rename, or where a rename is a copy); readers see it\ngrow, a failed upload's file is removed, and -a does not apply")
}

// deliveryOptions are the library options of put's delivery flag.
func (x *xferFlags) deliveryOptions() []sftp.TransferOption {
	if x.inPlace {
		return []sftp.TransferOption{sftp.InPlace()}
	}
	return nil
}

// checkGetDelivery refuses put's delivery flag on get: downloads always go through a
// part file.
func (x *xferFlags) checkGetDelivery() error {
	if x.inPlace {
		return usagef("get: --inplace is for put (a download is written to a part file and renamed)")
	}
	return nil
}
