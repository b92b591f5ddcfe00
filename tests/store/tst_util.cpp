// Exact time parsing and formatting, gzip input and atomic output.
#include "TestSupport.h"
#include "util/AtomicOutput.h"
#include "util/Error.h"
#include "util/Demangle.h"
#include "util/Format.h"
#include "util/InputFile.h"
#include "util/TimeParse.h"

#include <QFile>
#include <zlib.h>

using namespace pipescope;

class TstUtil : public QObject {
    Q_OBJECT
private slots:
    void rankRunsAndRowLimits()
    {
        QCOMPARE(rankRuns({5, 1, 2, 3, 8, 10, 11, 3}), std::string("1-3,5,8,10-11"));
        QCOMPARE(rankRuns({}), std::string());
        std::vector<int> strided;
        for (int r = 0; r < 1024; r += 4)
            strided.push_back(r);
        QCOMPARE(rankRuns(strided), std::string("0,4,8,12,16,20,24,28, ... (256 ranks)"));
        QCOMPARE(rankRuns({0, 1, 2, 3, 5, 7}, 2), std::string("0-3,5, ... (6 ranks)"));
        // A table of 40 rows is whole; of 41, it shows 16 and says what it left out.
        QVERIFY(!RowLimit(40).cut());
        QCOMPARE(RowLimit(40).more("ranks", "x"), std::string());
        const RowLimit cut(41);
        QVERIFY(cut.cut() && cut.show(15) && !cut.show(16));
        QCOMPARE(cut.more("ranks", "--json lists all"), std::string("  ... and 25 more ranks (--json lists all)\n"));
        QVERIFY(!RowLimit(41, true).cut());
    }

    void demangles()
    {
        QCOMPARE(demangle("_Z22ncclDevKernel_SendRecv24ncclDevKernelArgsStorageILm4096EE").value_or("-"),
                 std::string("ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"));
        QCOMPARE(demangle("_ZN7cutlass7Kernel2I41cutlass_80_simt_sgemm_64x64_8x5_tn_align1EEvNT_6ParamsE").value_or("-"),
                 std::string("void cutlass::Kernel2<cutlass_80_simt_sgemm_64x64_8x5_tn_align1>(cutlass_80_simt_sgemm_64x64_8x5_tn_align1::Params)"));
        QVERIFY(!demangle("ampere_sgemm_128x64_nn"));
        QVERIFY(!demangle("_Znot a name"));
        QVERIFY(!demangle(""));
    }

    void parseMicros_data()
    {
        QTest::addColumn<QString>("text");
        QTest::addColumn<qint64>("ns");
        QTest::newRow("integer") << "12" << qint64(12000);
        QTest::newRow("fraction") << "12.5" << qint64(12500);
        QTest::newRow("three decimals") << "1712195495505582.988" << qint64(1712195495505582988LL);
        QTest::newRow("beyond ns rounds half up") << "0.0015" << qint64(2);
        QTest::newRow("beyond ns rounds down") << "0.0014" << qint64(1);
        QTest::newRow("integral float") << "606519.0" << qint64(606519000);
        QTest::newRow("negative") << "-3.25" << qint64(-3250);
        QTest::newRow("exponent") << "1.5e3" << qint64(1500000);
        QTest::newRow("negative exponent") << "15e-1" << qint64(1500);
        QTest::newRow("zero") << "0" << qint64(0);
        QTest::newRow("many fraction digits") << "4458677083276.40462345" << qint64(4458677083276405LL);
    }
    void parseMicros()
    {
        QFETCH(QString, text);
        QFETCH(qint64, ns);
        auto v = parseMicrosToNanos(text.toStdString());
        QVERIFY(v.has_value());
        QCOMPARE(qint64(*v), ns);
    }
    void parseMicrosRejects_data()
    {
        QTest::addColumn<QString>("text");
        QTest::newRow("empty") << "";
        QTest::newRow("letters") << "abc";
        QTest::newRow("trailing") << "12x";
        QTest::newRow("sign only") << "-";
        QTest::newRow("overflow") << "99999999999999999999";
        QTest::newRow("bad exponent") << "1e";
    }
    void parseMicrosRejects()
    {
        QFETCH(QString, text);
        QVERIFY(!parseMicrosToNanos(text.toStdString()).has_value());
    }

    void gzipRoundTrip()
    {
        QTemporaryDir dir;
        std::string payload;
        for (int i = 0; i < 200000; ++i)
            payload += "line " + std::to_string(i) + "\n";
        auto p = test::path(dir, "a.gz");
        gzFile gz = gzopen(p.c_str(), "wb");
        gzwrite(gz, payload.data(), static_cast<unsigned>(payload.size()));
        gzclose(gz);
        QCOMPARE(InputFile::readAll(p), payload);
        InputFile f(p);
        QVERIFY(f.compressed());
    }

    void gzipTruncatedIsFormatError()
    {
        QTemporaryDir dir;
        std::string payload(100000, 'x');
        for (size_t i = 0; i < payload.size(); ++i)
            payload[i] = static_cast<char>('a' + (i * 7919) % 26);
        auto p = test::path(dir, "t.gz");
        gzFile gz = gzopen(p.c_str(), "wb");
        gzwrite(gz, payload.data(), static_cast<unsigned>(payload.size()));
        gzclose(gz);
        QFile f(QString::fromStdString(p));
        QVERIFY(f.open(QIODevice::ReadWrite));
        f.resize(f.size() / 2);
        f.close();
        try {
            InputFile::readAll(p);
            QFAIL("expected FormatError");
        } catch (const FormatError& e) {
            QVERIFY(QString(e.what()).contains("truncated"));
            QVERIFY(QString(e.what()).contains(QString::fromStdString(p)));
        }
    }

    void gzipCorruptIsFormatError()
    {
        QTemporaryDir dir;
        auto p = test::path(dir, "c.gz");
        QFile f(QString::fromStdString(p));
        QVERIFY(f.open(QIODevice::WriteOnly));
        f.write(QByteArray("\x1f\x8b\x08\x00garbage-not-deflate-data-at-all", 36));
        f.close();
        QVERIFY_THROWS_EXCEPTION(FormatError, InputFile::readAll(p));
    }

    void missingFileNamesIt()
    {
        try {
            InputFile f("/nonexistent/trace.json");
            QFAIL("expected Error");
        } catch (const Error& e) {
            QVERIFY(QString(e.what()).startsWith("/nonexistent/trace.json"));
        }
    }

    void atomicOutputLeavesNothingWithoutCommit()
    {
        QTemporaryDir dir;
        auto p = test::path(dir, "out.txt");
        {
            AtomicOutput out(p);
            QFile f(QString::fromStdString(out.tempPath()));
            QVERIFY(f.open(QIODevice::WriteOnly));
            f.write("partial");
        }
        QVERIFY(!QFile::exists(QString::fromStdString(p)));
        QCOMPARE(QDir(dir.path()).entryList(QDir::Files | QDir::Hidden).size(), 0);
        AtomicOutput::writeFile(p, "done");
        QCOMPARE(InputFile::readAll(p), std::string("done"));
    }

    void atomicOutputRefusesBadFolder()
    {
        QVERIFY_THROWS_EXCEPTION(Error, AtomicOutput("/nonexistent-dir/out.pipescope"));
        if (::geteuid() != 0) {
            QVERIFY_THROWS_EXCEPTION(Error, AtomicOutput("/proc/out.pipescope"));
        }
    }

    // Time bases are absolute times: a date, exact to the nanosecond, never a
    // 19-digit count or a "1696392839.587 s" duration.
    void epochTimes_data()
    {
        QTest::addColumn<qint64>("ns");
        QTest::addColumn<QString>("text");
        QTest::newRow("nsys session start") << qint64(1696392839587175550) << "2023-10-04 04:13:59.587175550 UTC";
        QTest::newRow("whole second") << qint64(1700000000000000000) << "2023-11-14 22:13:20.000000000 UTC";
        QTest::newRow("2000-01-01") << qint64(946684800000000000) << "2000-01-01 00:00:00.000000000 UTC";
        QTest::newRow("before 2000: another clock") << qint64(533338240) << "533338240 ns";
        QTest::newRow("negative") << qint64(-5) << "-5 ns";
        QTest::newRow("after 2200") << qint64(7258118400000000000) << "7258118400000000000 ns";
    }
    void epochTimes()
    {
        QFETCH(qint64, ns);
        QFETCH(QString, text);
        QCOMPARE(QString::fromStdString(formatEpochTime(ns)), text);
    }

    void shifts()
    {
        QCOMPARE(formatShift(-5'000'000), std::string("-5.000 ms"));
        QCOMPARE(formatShift(1234), std::string("+1.234 µs"));
        QCOMPARE(formatShift(0), std::string("0 ns"));
    }
};

QTEST_GUILESS_MAIN(TstUtil)
#include "tst_util.moc"
