package logmanager

// sysSyncfs is syncfs(2)'s number (the syscall package does not name it
// on amd64).
const sysSyncfs = 306
