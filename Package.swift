// swift-tools-version:6.1
import PackageDescription

let package = Package(
    name: "udp-tracker-cluster",
    platforms: [.macOS(.v14)],
    products: [
        .executable(name: "tracker", targets: ["tracker"]),
        .library(name: "TrackerLogic", targets: ["TrackerLogic"]),
    ],
    dependencies: [
        .package(url: "https://github.com/apple/swift-nio.git", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-argument-parser.git", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log.git", from: "1.16.2"),
        .package(url: "https://github.com/groue/GRDB.swift.git", from: "7.10.0"),
        .package(url: "https://github.com/apple/swift-crypto.git", from: "4.5.2"),
        .package(url: "https://github.com/hummingbird-project/hummingbird.git", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-http-types.git", from: "1.5.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus.git", from: "2.4.1"),
        .package(url: "https://github.com/LebJe/TOMLKit.git", from: "0.6.0"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle.git", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio-ssl.git", from: "2.37.6"),
    ],
    targets: [
        // Pure state machines: no I/O, no clock, no global randomness. Crypto only computes
        // (HMAC-SHA256 of cluster messages), so the simulator checks the same authentication.
        .target(
            name: "TrackerLogic",
            dependencies: [
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "Crypto", package: "swift-crypto"),
            ]
        ),
        // The STOMP client as a pure state machine and its frame codec: bytes, events and
        // timers in, actions out. NIOCore only, so its fuzz target builds without the runtime.
        .target(
            name: "STOMP",
            dependencies: [.product(name: "NIOCore", package: "swift-nio")]
        ),
        // recvmmsg(2) and sendmmsg(2), which Glibc's module hides (they need _GNU_SOURCE).
        .target(name: "CBatchedUDP"),
        .target(name: "CAllocator"),
        // epoll, eventfd and accept4, for the plain HTTP tracker's own listener.
        .target(name: "CEventPoll"),
        // Deterministic simulator: virtual time, simulated network and stores.
        .target(
            name: "Simulation",
            dependencies: ["TrackerLogic", .product(name: "NIOCore", package: "swift-nio")]
        ),
        // Binds TrackerLogic to real sockets, the clock and storage.
        .target(
            name: "TrackerRuntime",
            dependencies: [
                "TrackerLogic",
                "STOMP",
                "CBatchedUDP",
                "CAllocator",
                "CEventPoll",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "CryptoExtras", package: "swift-crypto"),
                .product(name: "TOMLKit", package: "TOMLKit"),
            ],
            path: "Sources/Runtime",
            // The dashboard's page is compiled into the binary: nothing to install beside
            // it, nothing fetched from elsewhere.
            resources: [
                .embedInCode("Dashboard/Assets/index.html"),
                .embedInCode("Dashboard/Assets/app.js"),
                .embedInCode("Dashboard/Assets/app.css"),
            ]
        ),
        // What the executable's tools use and a running node does not: the load generator,
        // the benches and the clients (`tracker bench`, `client`, `admin`).
        .target(
            name: "TrackerTools",
            dependencies: [
                "TrackerLogic",
                "TrackerRuntime",
                "CBatchedUDP",
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
            ],
            path: "Sources/Tools"
        ),
        .executableTarget(
            name: "tracker",
            dependencies: [
                "TrackerLogic",
                "TrackerRuntime",
                "TrackerTools",
                "STOMP",
                "Simulation",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "TOMLKit", package: "TOMLKit"),
            ]
        ),
        .testTarget(
            name: "ProtocolTests",
            dependencies: ["TrackerLogic", .product(name: "NIOCore", package: "swift-nio"),
                           .product(name: "Crypto", package: "swift-crypto")]
        ),
        .testTarget(
            name: "RuntimeTests",
            dependencies: ["TrackerRuntime", "TrackerTools", "TrackerLogic", "STOMP", .product(name: "NIOCore", package: "swift-nio"),
                           .product(name: "GRDB", package: "GRDB.swift"),
                           .product(name: "NIOPosix", package: "swift-nio"),
                           .product(name: "NIOConcurrencyHelpers", package: "swift-nio")],
            // A repository file written by 0.9.0 (RepositoryMigrationTests).
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "STOMPTests",
            dependencies: ["STOMP", "TrackerLogic", .product(name: "NIOCore", package: "swift-nio")]
        ),
        .testTarget(
            name: "SimulationTests",
            dependencies: ["Simulation", "TrackerLogic", .product(name: "NIOCore", package: "swift-nio")]
        ),
    ],
    swiftLanguageModes: [.v6]
)
