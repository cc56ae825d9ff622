module github.com/sluicehq/sftp/bench

go 1.26.0

require (
	github.com/pkg/sftp v1.13.12
	github.com/sluicehq/sftp v0.0.0-00010101000000-000000000000
	github.com/stretchr/testify v1.12.1
	golang.org/x/crypto v0.58.0
)

require (
	github.com/kr/fs v0.1.0 // indirect
	go.yaml.in/yaml/v3 v3.0.5 // indirect
	golang.org/x/sync v0.24.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
)

replace github.com/sluicehq/sftp => ../
