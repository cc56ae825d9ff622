// Package localfs is the local side of a transfer: where a Get writes (an *os.Root
// opened on the destination, part files created exclusively, directories changed
// through their own descriptors), how a Put opens what it reads (as it was listed, or
// not at all), the times and modes set on open files, and which names from a remote
// listing may be joined to a local directory on this system.
//
// It holds no state of the sftp package and knows nothing of SFTP: everything here
// is about the local file system, and is tested on it (the sftp package's tests cover
// it through Get and Put against real servers).
package localfs
