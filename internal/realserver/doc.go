// Package realserver starts SFTP servers other than OpenSSH's for the cross-server
// tests, each on 127.0.0.1 with its own host key and one authorized client key in a
// temporary directory: ProFTPD's mod_sftp, asyncssh and paramiko (the two scripts in
// this directory), and dropbear running OpenSSH's sftp-server.
//
// A launcher skips the test, saying which package to install, when its server is not
// on the machine (scripts/test.sh installs them all), so a skip is always visible in
// the test output and never silent.
//
// Everything but this comment is Linux-only: the launchers rely on Pdeathsig and mount
// namespaces, as the servers themselves rely on Debian's packages.
package realserver
