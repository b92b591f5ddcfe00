#pragma once
// File > Open remote...: a host and a job's path on it, read into an
// ssh://[user@]host[:port]/path address (RemoteAddress). The last host and
// path are offered again; no password is asked for or kept (ssh uses the
// user's own configuration and agent).
#include <QDialog>

class QLabel;
class QLineEdit;
class QPushButton;

namespace pipescope::gui {

class OpenRemoteDialog : public QDialog {
    Q_OBJECT
public:
    explicit OpenRemoteDialog(QWidget* parent = nullptr);
    // The address of what was entered ("" while it is not one).
    QString address() const;
    QLineEdit* hostField() const { return host_; }
    QLineEdit* pathField() const { return path_; }
    // Asks; the address, or "" when the user cancels.
    static QString ask(QWidget* parent);

private:
    void check();
    QLineEdit* host_ = nullptr;
    QLineEdit* path_ = nullptr;
    QLabel* problem_ = nullptr;
    QPushButton* ok_ = nullptr;
};

} // namespace pipescope::gui
