#include "remote/RemoteDetails.h"

#include "util/Format.h"

#include <QStringList>

namespace pipescope::gui {

namespace {

QString text(const nlohmann::json& j, const char* key)
{
    const auto it = j.find(key);
    return it != j.end() && it->is_string() ? QString::fromStdString(it->get<std::string>()).toHtmlEscaped() : QString();
}

QString number(const nlohmann::json& j, const char* key)
{
    const auto it = j.find(key);
    return it != j.end() && it->is_number_integer() ? QString::number(it->get<int64_t>()) : QString();
}

} // namespace

QString serverDetailsHtml(const nlohmann::json& d)
{
    QStringList lines;
    if (const QString name = text(d, "name"); !name.isEmpty())
        lines << QStringLiteral("<b>%1</b>").arg(name);
    if (const QString what = text(d, "what"); !what.isEmpty())
        lines << QStringLiteral("work: %1").arg(what);
    if (const auto comm = d.find("comm"); comm != d.end() && comm->is_object()) {
        QStringList parts;
        if (const QString op = text(*comm, "op"); !op.isEmpty())
            parts << op;
        if (const auto b = comm->find("bytes"); b != comm->end() && b->is_number_integer() && b->get<int64_t>() >= 0)
            parts << QString::fromStdString(formatBytes(b->get<int64_t>()));
        if (const QString peer = number(*comm, "peer"); !peer.isEmpty() && peer != QLatin1String("-1"))
            parts << QStringLiteral("peer rank %1").arg(peer);
        if (const QString group = number(*comm, "group_size"); !group.isEmpty() && group != QLatin1String("-1"))
            parts << QStringLiteral("group of %1").arg(group);
        if (!parts.isEmpty())
            lines << QStringLiteral("communication: %1").arg(parts.join(QStringLiteral(", ")));
    }
    if (const auto a = d.find("activity"); a != d.end() && a->is_object()) {
        if (const auto l = a->find("launch"); l != a->end() && l->is_object()) {
            QString line = QStringLiteral("launched by %1").arg(text(*l, "name"));
            if (const auto delay = l->find("delay_ns"); delay != l->end() && delay->is_number_integer())
                line += QStringLiteral(", %1 before it ran").arg(QString::fromStdString(formatDuration(delay->get<int64_t>())));
            lines << line;
        }
        if (const QString id = number(*a, "id"); !id.isEmpty())
            lines << QStringLiteral("activity %1 in the job's store").arg(id);
    }
    if (lines.isEmpty())
        return {};
    return QStringLiteral("<br>From the server: ") + lines.join(QStringLiteral("<br>"));
}

} // namespace pipescope::gui
