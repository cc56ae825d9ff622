package testserver

import "time"

// Personalities: Options that make a Server behave as a server that cannot be run
// here does, built from that server's own documentation and its users' reports.
// The sftptest package exports them, and its documentation of each (its
// personality.go) lists every behaviour with its source; docs/servers.md has the
// same account for users. Where a source is silent a personality behaves as
// OpenSSH's sftp-server, except where the store behind the server cannot (an
// object store has no links): those choices are marked "assumed" there.

// Personality names a personality and builds its Options.
type Personality struct {
	Name    string
	Options func() Options
}

// Personalities lists every personality, OpenSSH's first.
func Personalities() []Personality {
	return []Personality{
		{"openssh", OpenSSH},
		{"aws-s3", AWSTransferS3},
		{"azure-blob", AzureBlob},
		{"sftpgo-cloud", SFTPGoCloud},
		{"minio", MinIO},
		{"files-com", FilesCom},
		{"hetzner", HetznerStorageBox},
		{"drop-folder", DropFolder},
		{"windows-openssh", WindowsOpenSSH},
		{"ibm-sterling", IBMSterling},
	}
}

// allAttrs are the four ATTRS fields a SETSTAT can carry.
const allAttrs = AttrSize | AttrUIDGID | AttrPermissions | AttrACModTime

// metaAttrs are SETSTAT's fields other than the size.
const metaAttrs = AttrUIDGID | AttrPermissions | AttrACModTime

// OpenSSH is OpenSSH 9.x's sftp-server, the zero Options.
func OpenSSH() Options { return Options{} }

// AWSTransferS3 is AWS Transfer Family with an S3 bucket behind it.
// sftptest's documentation of it lists each behaviour and its source.
func AWSTransferS3() Options {
	return Options{
		Extensions: map[string]string{},
		Quirks: &Quirks{
			Name:                "AWS Transfer Family (S3)",
			WholeListing:        true,
			ReadWriteOpen:       StatusOpUnsupported,
			SetstatRefused:      StatusOpUnsupported,
			SetstatRefusedAttrs: allAttrs,
			SecondWriter:        StatusFailure,
			RenameReplaces:      true,
			LinksRefused:        StatusOpUnsupported,
			MaxSessions:         10,
			IdleTimeout:         1800 * time.Second,
		},
	}
}

// AzureBlob is SFTP for Azure Blob Storage (MicrosoftDocs/azure-docs,
// sftptest's documentation of it lists each behaviour and its source.
func AzureBlob() Options {
	return Options{
		Extensions: map[string]string{},
		Quirks: &Quirks{
			Name:                "Azure Blob Storage SFTP",
			ReadWriteOpen:       StatusOpUnsupported,
			AppendOpen:          StatusOpUnsupported,
			SetstatRefused:      StatusOpUnsupported,
			SetstatRefusedAttrs: metaAttrs,
			LinksRefused:        StatusOpUnsupported,
			RenameExisting:      StatusFailure,
			SecondWriter:        StatusFailure,
			IdleTimeout:         2 * time.Minute,
		},
	}
}

// SFTPGoCloud is SFTPGo serving an S3, GCS or Azure Blob backend (drakkan/sftpgo
// sftptest's documentation of it lists each behaviour and its source.
func SFTPGoCloud() Options {
	return Options{
		Extensions: map[string]string{extStatvfs: "2"},
		ReadCap:    32768,
		Quirks: &Quirks{
			Name:                "SFTPGo (S3, GCS, Azure Blob)",
			ReadWriteRead:       StatusOpUnsupported,
			ResumeOpen:          StatusOpUnsupported,
			SetstatRefused:      StatusOpUnsupported,
			SetstatRefusedAttrs: metaAttrs,
			TruncateRefused:     StatusOpUnsupported,
			LinksRefused:        StatusOpUnsupported,
			RenameReplaces:      true,
			RenameFullDir:       StatusFailure,
			IdleTimeout:         15 * time.Minute,
		},
	}
}

// MinIO is MinIO's SFTP server (minio cmd/sftp-server-driver.go, docs/ftp/README.md:
// sftptest's documentation of it lists each behaviour and its source.
func MinIO() Options {
	return Options{
		Extensions: map[string]string{extHardlink: "1", extPosixRename: "1", extStatvfs: "2"},
		ReadCap:    32768,
		Quirks: &Quirks{
			Name:                "MinIO SFTP",
			RenameRefused:       StatusOpUnsupported,
			SetstatRefused:      StatusOpUnsupported,
			SetstatRefusedAttrs: allAttrs,
			LinksRefused:        StatusOpUnsupported,
			RefusedExtensions:   []string{extHardlink, extStatvfs},
			MissingIsDir:        true,
			RemoveMissingOK:     true,
			RmdirRemovesAll:     true,
			ImplicitDirs:        true,
			NoDotEntries:        true,
			OverwriteTruncates:  true,
			HoleFailsClose:      true,
			OpenMissing:         StatusFailure,
			ReadWriteRead:       StatusFailure,
		},
	}
}

// FilesCom is Files.com's SFTP server (files.com/docs: "Connection Settings In
// sftptest's documentation of it lists each behaviour and its source.
func FilesCom() Options {
	return Options{
		Extensions: map[string]string{},
		Quirks: &Quirks{
			Name:                "Files.com",
			FoldCase:            true,
			SetstatIgnoredAttrs: metaAttrs,
			LinksRefused:        StatusOpUnsupported,
			IdleTimeout:         60 * time.Second,
		},
	}
}

// HetznerStorageBox is a Hetzner Storage Box.
// sftptest's documentation of it lists each behaviour and its source.
func HetznerStorageBox() Options {
	return Options{
		Extensions: map[string]string{},
		Quirks: &Quirks{
			Name:           "Hetzner Storage Box",
			RenameExisting: 11,
			MaxSessions:    10,
		},
	}
}

// DropFolder is a write-only ("upload only") account, as many managed-file-
// sftptest's documentation of it lists each behaviour and its source.
func DropFolder() Options {
	return Options{Quirks: &Quirks{Name: "write-only drop folder", WriteOnly: true}}
}

// WindowsOpenSSH is Win32-OpenSSH's sftp-server.
// sftptest's documentation of it lists each behaviour and its source.
func WindowsOpenSSH() Options {
	return Options{
		ReadCap: 102400,
		Quirks: &Quirks{
			Name:              "Windows OpenSSH",
			PathPrefix:        "/C:",
			RenameSelfRemoves: true,
		},
	}
}

// IBMSterling is IBM Sterling B2B Integrator's SFTP server with an extractability
// sftptest's documentation of it lists each behaviour and its source.
func IBMSterling() Options {
	return Options{
		Extensions: map[string]string{},
		Quirks:     &Quirks{Name: "IBM Sterling B2B Integrator", ExtractCount: 1},
	}
}
