module github.com/deepinfer/deepinfer/bindings/go

go 1.19
