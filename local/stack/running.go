package stack

// Running reports whether dir holds the stack.json of a stack one of whose
// recorded processes (the serving process, the forwarder, the control
// plane) is still alive, checked by process ID and command line as Up's
// "already running" check does. A missing dir or stack.json is false.
func Running(dir string) bool { return running(dir) }
