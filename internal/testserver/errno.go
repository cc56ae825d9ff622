package testserver

import "io/fs"

// errno names the failure the way a Unix kernel would, so the mapping to
// SFTP status codes can follow OpenSSH's errno_to_portable exactly instead
// of each handler picking a code ad hoc.
type errno uint8

const (
	eNOENT errno = iota + 1
	eNOTDIR
	eBADF
	eLOOP
	ePERM
	eACCES
	eINVAL
	eNAMETOOLONG
	eEXIST
	eNOTEMPTY
	eISDIR
	eBUSY
	eFBIG
	eMFILE
)

// status maps like OpenSSH's errno_to_portable: ENOENT/ENOTDIR/EBADF/ELOOP
// are NO_SUCH_FILE, EPERM/EACCES PERMISSION_DENIED, EINVAL/ENAMETOOLONG
// BAD_MESSAGE, everything else FAILURE.
func (e errno) status() uint32 {
	switch e {
	case eNOENT, eNOTDIR, eBADF, eLOOP:
		return StatusNoSuchFile
	case ePERM, eACCES:
		return StatusPermissionDenied
	case eINVAL, eNAMETOOLONG:
		return StatusBadMessage
	}
	return StatusFailure
}

func (e errno) Error() string {
	switch e {
	case eNOENT:
		return "no such file or directory"
	case eNOTDIR:
		return "not a directory"
	case eBADF:
		return "bad file descriptor"
	case eLOOP:
		return "too many levels of symbolic links"
	case ePERM:
		return "operation not permitted"
	case eACCES:
		return "permission denied"
	case eINVAL:
		return "invalid argument"
	case eNAMETOOLONG:
		return "file name too long"
	case eEXIST:
		return "file exists"
	case eNOTEMPTY:
		return "directory not empty"
	case eISDIR:
		return "is a directory"
	case eBUSY:
		return "device or resource busy"
	case eFBIG:
		return "file too large"
	case eMFILE:
		return "too many open files"
	}
	return "unknown error"
}

// Is lets the test helpers' errors match the io/fs sentinels.
func (e errno) Is(target error) bool {
	switch target {
	case fs.ErrNotExist:
		return e == eNOENT
	case fs.ErrExist:
		return e == eEXIST || e == eNOTEMPTY
	case fs.ErrPermission:
		return e == ePERM || e == eACCES
	case fs.ErrInvalid:
		return e == eINVAL
	}
	return false
}

// statusOf turns a handler error into a status code; anything that isn't an
// errno is an internal surprise and reported as plain FAILURE.
func statusOf(err error) uint32 {
	if err == nil {
		return StatusOK
	}
	if e, ok := err.(errno); ok {
		return e.status()
	}
	return StatusFailure
}
