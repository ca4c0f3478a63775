import ArgumentParser
import Foundation
import TrackerLogic

/// Creates a cluster key: 32 bytes from the system's generator, as 64 hex digits.
struct Keygen: ParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Create a cluster key file for --cluster-key-file (or --connection-id-key-file).",
        discussion: "Copy the same file to every node of the cluster and keep it secret (mode 600).")

    @Option(help: "File to create (mode 600; an existing file is never overwritten). Default: standard output.")
    var output: String?

    func run() throws {
        var system = SystemRandomNumberGenerator()
        let bytes = (0..<ClusterKey.length).map { _ in UInt8.random(in: 0...255, using: &system) }
        let text = ClusterKey.keyFile(for: bytes)
        guard let output else {
            print(text, terminator: "")
            return
        }
        let fd = open(output, O_WRONLY | O_CREAT | O_EXCL, 0o600)
        guard fd >= 0 else { throw ValidationError("cannot create \(output): \(String(cString: strerror(errno)))") }
        defer { close(fd) }
        let written = text.utf8CString.withUnsafeBufferPointer { write(fd, $0.baseAddress, text.utf8.count) }
        guard written == text.utf8.count else { throw ValidationError("cannot write \(output)") }
    }
}
