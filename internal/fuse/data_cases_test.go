package fuse

// dataCases are the file-content cases; none until file I/O is wired.
func dataCases() []posixCase { return nil }
