#include "session/RecentJobs.h"

#include <QFileInfo>
#include <QSettings>
#include <QVariantMap>

namespace pipescope::gui {

namespace {

constexpr int kMaxRecent = 10;
const QString kKey = QStringLiteral("recentJobs");
const QString kOldKey = QStringLiteral("recent"); // paths only, one entry a line per input

// A remote job's ssh:// address is kept as it is.
QString absolute(const QString& path)
{
    return path.isEmpty() || path.startsWith(QLatin1String("ssh://")) ? path : QFileInfo(path).absoluteFilePath();
}

QString intList(const std::vector<int>& v)
{
    QStringList parts;
    for (int x : v)
        parts << QString::number(x);
    return parts.join(QLatin1Char(','));
}

std::vector<int> ints(const QString& text)
{
    std::vector<int> out;
    for (const QString& part : text.split(QLatin1Char(','), Qt::SkipEmptyParts)) {
        bool ok = false;
        const int x = part.toInt(&ok);
        if (!ok)
            return {};
        out.push_back(x);
    }
    return out;
}

QVariantMap toMap(const RecentJob& r)
{
    QVariantMap m;
    m[QStringLiteral("inputs")] = r.inputs;
    if (r.options.layers > 0)
        m[QStringLiteral("layers")] = r.options.layers;
    if (!r.options.modelFile.isEmpty())
        m[QStringLiteral("model")] = r.options.modelFile;
    if (!r.options.measuredBoundaries.empty())
        m[QStringLiteral("measuredBoundaries")] = intList(r.options.measuredBoundaries);
    if (r.options.iteration)
        m[QStringLiteral("iteration")] = *r.options.iteration;
    if (!r.options.commRulesFile.isEmpty())
        m[QStringLiteral("commRules")] = r.options.commRulesFile;
    return m;
}

RecentJob fromMap(const QVariantMap& m)
{
    RecentJob r;
    r.inputs = m.value(QStringLiteral("inputs")).toStringList();
    r.options.layers = m.value(QStringLiteral("layers")).toInt();
    r.options.modelFile = m.value(QStringLiteral("model")).toString();
    r.options.measuredBoundaries = ints(m.value(QStringLiteral("measuredBoundaries")).toString());
    if (m.contains(QStringLiteral("iteration")))
        r.options.iteration = m.value(QStringLiteral("iteration")).toInt();
    r.options.commRulesFile = m.value(QStringLiteral("commRules")).toString();
    return r;
}

} // namespace

QString RecentJob::label() const
{
    QString text = inputs.join(QStringLiteral(", "));
    QStringList opts;
    if (options.layers > 0)
        opts << QStringLiteral("--layers %1").arg(options.layers);
    if (!options.modelFile.isEmpty())
        opts << QStringLiteral("--model %1").arg(QFileInfo(options.modelFile).fileName());
    if (!options.measuredBoundaries.empty())
        opts << QStringLiteral("--measured-boundaries %1").arg(intList(options.measuredBoundaries));
    if (options.iteration)
        opts << QStringLiteral("--iteration %1").arg(*options.iteration);
    if (!options.commRulesFile.isEmpty())
        opts << QStringLiteral("--comm-rules %1").arg(QFileInfo(options.commRulesFile).fileName());
    if (!opts.isEmpty())
        text += QStringLiteral("  (") + opts.join(QLatin1Char(' ')) + QLatin1Char(')');
    return text;
}

QList<RecentJob> recentJobs()
{
    QSettings settings;
    QList<RecentJob> out;
    if (settings.contains(kKey)) {
        for (const QVariant& v : settings.value(kKey).toList()) {
            RecentJob r = fromMap(v.toMap());
            if (!r.inputs.isEmpty())
                out.push_back(std::move(r));
        }
        return out;
    }
    for (const QString& entry : settings.value(kOldKey).toStringList())
        out.push_back(RecentJob{entry.split(QLatin1Char('\n')), {}});
    return out;
}

void rememberRecentJob(const QStringList& inputs, const OpenOptions& options)
{
    RecentJob job;
    for (const QString& in : inputs)
        job.inputs << absolute(in);
    job.options.layers = options.layers;
    job.options.modelFile = absolute(options.modelFile);
    job.options.measuredBoundaries = options.measuredBoundaries;
    job.options.iteration = options.iteration;
    job.options.commRulesFile = absolute(options.commRulesFile);
    QList<RecentJob> recent = recentJobs();
    recent.erase(std::remove_if(recent.begin(), recent.end(), [&](const RecentJob& r) { return r.inputs == job.inputs; }),
                 recent.end());
    recent.prepend(job);
    while (recent.size() > kMaxRecent)
        recent.removeLast();
    QVariantList list;
    for (const RecentJob& r : recent)
        list << toMap(r);
    QSettings settings;
    settings.setValue(kKey, list);
    settings.remove(kOldKey);
}

} // namespace pipescope::gui
