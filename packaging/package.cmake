# SPDX-License-Identifier: Apache-2.0
# How medic installs and packages: `cmake --install` lays it out as the
# Debian package does, and `cpack -G DEB` (in a build configured with
# CMAKE_INSTALL_PREFIX=/usr, as the release preset is) builds that package.
include(GNUInstallDirs)

install(TARGETS medic RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
# with the prefix /usr, GNUInstallDirs puts these in /etc and /var
install(FILES ${PROJECT_SOURCE_DIR}/packaging/medic.yaml
        DESTINATION ${CMAKE_INSTALL_FULL_SYSCONFDIR}/medic)
install(FILES ${PROJECT_SOURCE_DIR}/packaging/medic.service
              ${PROJECT_SOURCE_DIR}/packaging/medic-agent.service
        DESTINATION lib/systemd/system)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${PROJECT_SOURCE_DIR}/packaging/grafana-dashboard.json
              ${PROJECT_SOURCE_DIR}/packaging/copyright
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY ${PROJECT_SOURCE_DIR}/docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}
        FILES_MATCHING PATTERN "*.md" PATTERN "*.png" PATTERN "*.svg")
install(DIRECTORY ${PROJECT_SOURCE_DIR}/examples/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)

# The manual pages, written from medic's own --help texts (packaging/man.py)
# once medic is built: medic(1), medic-COMMAND(1), medic.yaml(5).
find_program(MEDIC_MAN_PYTHON NAMES python3 PATHS /usr/bin NO_DEFAULT_PATH)
if(MEDIC_MAN_PYTHON)
  add_custom_command(OUTPUT ${CMAKE_BINARY_DIR}/man/stamp
    COMMAND ${CMAKE_COMMAND} -E rm -rf ${CMAKE_BINARY_DIR}/man
    COMMAND ${MEDIC_MAN_PYTHON} ${PROJECT_SOURCE_DIR}/packaging/man.py $<TARGET_FILE:medic>
            ${CMAKE_BINARY_DIR}/man --gzip
    COMMAND ${CMAKE_COMMAND} -E touch ${CMAKE_BINARY_DIR}/man/stamp
    DEPENDS medic ${PROJECT_SOURCE_DIR}/packaging/man.py
    COMMENT "Writing the manual pages from medic's --help")
  add_custom_target(man ALL DEPENDS ${CMAKE_BINARY_DIR}/man/stamp)
  install(DIRECTORY ${CMAKE_BINARY_DIR}/man/ DESTINATION ${CMAKE_INSTALL_MANDIR}
          FILES_MATCHING PATTERN "*.gz")
else()
  message(STATUS "python3 not found: no manual pages (packaging/man.py)")
endif()

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME medic)
set(CPACK_PACKAGE_VENDOR "medic")
set(CPACK_RESOURCE_FILE_LICENSE ${PROJECT_SOURCE_DIR}/LICENSE)
set(CPACK_PACKAGE_CONTACT "medic maintainers <medic@example.org>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Alertmanager webhook target that remediates GPU-cluster failures")
set(CPACK_PACKAGE_DESCRIPTION
    "medic receives Alertmanager's notifications, commits each to a durable, hash-chained\n\
audit log, scores the alerting GPU's failure risk from its Prometheus telemetry with an\n\
embedded LSTM, and acts under policies with safety guards: Slurm drain and resume, IPMI\n\
power cycles, GPU power limits through its node agent, notifications. It serves an\n\
on-call page and Prometheus metrics.")
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_PACKAGING_INSTALL_PREFIX ${CMAKE_INSTALL_PREFIX})
# Depends: the package of every library the binary links (dpkg-shlibdeps),
# and adduser for the system user the maintainer scripts create
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")
# maintenance windows that recur on a local clock read its zoneinfo
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "tzdata")
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    "${PROJECT_SOURCE_DIR}/packaging/postinst;${PROJECT_SOURCE_DIR}/packaging/prerm;\
${PROJECT_SOURCE_DIR}/packaging/postrm;${PROJECT_SOURCE_DIR}/packaging/conffiles")
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION TRUE)
include(CPack)
