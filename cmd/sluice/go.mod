module github.com/sluicehq/sftp/cmd/sluice

go 1.26.0

replace github.com/sluicehq/sftp => ../..

require (
	github.com/kevinburke/ssh_config v1.6.0
	github.com/sluicehq/sftp v0.0.0-00010101000000-000000000000
	github.com/stretchr/testify v1.12.1
	go.uber.org/goleak v1.3.0
	golang.org/x/crypto v0.58.0
	golang.org/x/sys v0.49.0
	golang.org/x/term v0.47.0
	golang.org/x/time v0.16.0
)

require (
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sync v0.24.0 // indirect
)
