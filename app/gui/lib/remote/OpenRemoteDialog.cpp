#include "remote/OpenRemoteDialog.h"

#include "remote/RemoteAddress.h"

#include <QDialogButtonBox>
#include <QFormLayout>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QSettings>
#include <QVBoxLayout>

namespace pipescope::gui {

namespace {
const QString kHostKey = QStringLiteral("remote/host");
const QString kPathKey = QStringLiteral("remote/path");
} // namespace

OpenRemoteDialog::OpenRemoteDialog(QWidget* parent) : QDialog(parent)
{
    setWindowTitle(QStringLiteral("Open a remote job"));
    auto* layout = new QVBoxLayout(this);
    auto* intro = new QLabel(QStringLiteral("The job stays where it is: the app runs <tt>ssh HOST pipescope serve --stdio PATH</tt> "
                                            "with your own SSH configuration and agent, and asks only for what it draws. "
                                            "It asks for no password and keeps none."),
                             this);
    intro->setWordWrap(true);
    layout->addWidget(intro);
    auto* form = new QFormLayout;
    host_ = new QLineEdit(this);
    host_->setObjectName(QStringLiteral("remote-host"));
    host_->setPlaceholderText(QStringLiteral("login.cluster, user@login.cluster:2222 or a Host of ~/.ssh/config"));
    path_ = new QLineEdit(this);
    path_->setObjectName(QStringLiteral("remote-path"));
    path_->setPlaceholderText(QStringLiteral("/lustre/run-1234/job.pipescope or ~/runs/job"));
    form->addRow(QStringLiteral("&Host:"), host_);
    form->addRow(QStringLiteral("&Path:"), path_);
    layout->addLayout(form);
    problem_ = new QLabel(this);
    problem_->setWordWrap(true);
    layout->addWidget(problem_);
    auto* buttons = new QDialogButtonBox(QDialogButtonBox::Ok | QDialogButtonBox::Cancel, this);
    ok_ = buttons->button(QDialogButtonBox::Ok);
    ok_->setText(QStringLiteral("&Open"));
    layout->addWidget(buttons);
    connect(buttons, &QDialogButtonBox::accepted, this, &QDialog::accept);
    connect(buttons, &QDialogButtonBox::rejected, this, &QDialog::reject);
    connect(host_, &QLineEdit::textChanged, this, &OpenRemoteDialog::check);
    connect(path_, &QLineEdit::textChanged, this, &OpenRemoteDialog::check);
    QSettings settings;
    host_->setText(settings.value(kHostKey).toString());
    path_->setText(settings.value(kPathKey).toString());
    check();
    resize(560, sizeHint().height());
}

QString OpenRemoteDialog::address() const
{
    QString path = path_->text().trimmed();
    const QString host = host_->text().trimmed();
    if (host.isEmpty() || path.isEmpty())
        return {};
    if (!path.startsWith(QLatin1Char('/')))
        path.prepend(QLatin1Char('/')); // "~/job" -> ssh://host/~/job
    const QString text = QStringLiteral("ssh://") + host + path;
    return RemoteAddress::parse(text, nullptr) ? text : QString();
}

void OpenRemoteDialog::check()
{
    QString why;
    const QString host = host_->text().trimmed(), path = path_->text().trimmed();
    if (!host.isEmpty() && !path.isEmpty())
        RemoteAddress::parse(QStringLiteral("ssh://") + host + (path.startsWith(QLatin1Char('/')) ? path : QLatin1Char('/') + path), &why);
    problem_->setText(why);
    problem_->setVisible(!why.isEmpty());
    ok_->setEnabled(!address().isEmpty());
}

QString OpenRemoteDialog::ask(QWidget* parent)
{
    OpenRemoteDialog dialog(parent);
    if (dialog.exec() != QDialog::Accepted)
        return {};
    QSettings settings;
    settings.setValue(kHostKey, dialog.host_->text().trimmed());
    settings.setValue(kPathKey, dialog.path_->text().trimmed());
    return dialog.address();
}

} // namespace pipescope::gui
