/// What `tracker --version` prints. The version is set here, by hand, at a release;
/// `scripts/package.sh` stamps the commit while it builds (and puts this file back), so
/// a binary built any other way says its commit is unknown rather than guess.
enum BuildInfo {
    static let version = "0.9.0"
    static let commit = "unknown"
    static var line: String { "\(version) (commit \(commit))" }
}
